"""The benchmark functions run end to end on a tiny model and fill every field (no timing asserted)."""

from __future__ import annotations

import math

import pytest

from macaronic.bench import sections, suite
from macaronic.engine.base import load_base


def test_switch_ttft_turn_mode_prefills_only_the_new_turn(tiny_dirs, tmp_path):
    base = load_base(tiny_dirs["llama"])
    rows = suite.switch_ttft(base, tmp_path, lengths=(96,), reps=1)
    row = rows[0]
    assert set(row) >= {"history_tokens", "turn_ms", "per_adapter_ms", "cleared_ms", "peft_ms"}
    assert row["history_tokens"] == 96
    # turn mode recomputed only the new user turn, never the 96 history tokens
    assert 0 < row["turn_prefill_tokens"] <= row["prompt_tokens"] - 96


def test_adapter_latency_and_decode_fields(tiny_dirs, tmp_path):
    base = load_base(tiny_dirs["llama"])
    ad = suite.adapter_latency(base, tmp_path, counts=(4, 12), rank=4)
    for k in ("switch_us", "load_ms", "bytes_per_adapter", "switch_us_12", "load_ms_12"):
        assert ad[k] is not None and ad[k] > 0
    dec = suite.decode_throughput(base, tmp_path, tokens=4)
    for k in ("single_tok_s", "mixed4_tok_s", "mixed16_tok_s", "base16_tok_s"):
        assert dec[k] > 0
    # the llama.cpp peer loads SmolLM2-135M's GGUF, so for another base (this tiny one) its rows are
    # left out, installed or not; for SmolLM2 it is that base's own file
    for k in ("llamacpp_single_tok_s", "llamacpp16_tok_s"):
        assert dec[k] is None, (k, dec[k])
    assert suite.peer_gguf(base) is None
    small = type("B", (), {"name": "smollm2-135m-instruct"})()
    assert suite.peer_gguf(small).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_markdown_section_is_replaced_in_place(tmp_path):
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n\nintro\n\n<!-- bench:start -->\nold\n<!-- bench:end -->\n\n## Routing\nkept\n")
    r = {"command": "macaronic bench --quick", "seconds": 1.0, "quick": True,
         "machine": {"cpu": "x", "cores": 2, "memory_gb": 1, "memory_bandwidth_gbs": 1, "torch": "t", "torch_threads": 2},
         "base": {"id": "b", "params": 1e6}, "router": None,
         "prefill": {"prefill512_tok_s": 1.0, "llamacpp_prefill512_tok_s": None}}
    sections.write_markdown(md, r)
    text = md.read_text()
    assert "old" not in text and "## Routing\nkept" in text and "Prefill throughput" in text
    assert text.count("<!-- bench:start -->") == 1 and text.count("<!-- bench:end -->") == 1


def test_decode_at_other_precisions_and_prefill_fields(tiny_dirs, tmp_path):
    base = load_base(tiny_dirs["llama"])
    for name in suite.PRECISIONS:
        dec = suite.decode_precision(base.path, tmp_path / name, name, tokens=4)
        assert dec["single_tok_s"] > 0 and dec["mixed16_tok_s"] > 0
    pre = suite.prefill_throughput(base, lengths=(64,))
    assert pre["prefill64_tok_s"] > 0 and pre["bf16_prefill64_tok_s"] > 0


def test_precision_accuracy_compares_every_fast_path_to_fp32(tiny_dirs):
    base = load_base(tiny_dirs["llama"])
    acc = suite.precision_accuracy(base, tokens=24)
    for name in suite.PRECISIONS:
        assert 0.5 <= acc[name]["top1_agree"] <= 1.0 and math.isfinite(acc[name]["kl"])  # NaN fails
    assert acc["int4"]["kl"] > acc["bf16"]["kl"]  # coarser weights, larger divergence


def test_lora_overhead_compares_grouped_and_stacked_banks(tiny_dirs, tmp_path):
    from macaronic.bench import lora

    base = load_base(tiny_dirs["llama"])
    out = lora.lora_overhead(base.path, tmp_path, {"fp32": ("float32", "none"), "int4": ("bfloat16", "int4")}, reps=2)
    for name in ("fp32", "int4"):
        for layout in ("contiguous", "scattered"):
            row = out[name][layout]
            assert row["base_step_ms"] > 0 and row["grouped_over_stacked"] > 0
            assert {"grouped_overhead_pct", "stacked_overhead_pct", "grouped_overhead_wall_pct"} <= set(row)
    assert "| int4 | scattered |" in "\n".join(lora.markdown(out))


def test_peer_rows_pair_ours_with_llamacpp_exactly_when_it_can_run(tiny_dirs, tmp_path):
    """The peer loads a registered base's GGUF: on the tiny base it never runs, installed or not."""
    from macaronic.bench import peer

    out = peer.run(tiny_dirs["llama"], tmp_path, threads=(1,), reps=1, tokens=4)
    installed = False  # the tiny base is not a registered one
    (row,) = out["rows"]  # int4 only: the tiny base has no GGUF blocks
    assert out["quants"] == ["int4"] and row["quant"] == "int4"
    assert out["llamacpp"] == installed and row["threads"] == 1 and row["ours1_tok_s"] > 0 and row["ours16_tok_s"] > 0
    for k in ("peer1_tok_s", "peer16_tok_s"):
        assert (row[k] > 0) if installed else (row[k] is None), (k, row[k])
    assert ("ratio16" in row) == installed
    md = "\n".join(peer.markdown(out))
    assert ("| 1 |" in md) if installed else ("not installed, or the base is not a registered one" in md)


def test_stacked_peer_equals_the_grouped_bank(tiny_dirs, tmp_path):
    """The benchmark's 'before' bank computes the same deltas, so the comparison is like for like."""
    import torch

    from macaronic.bench.lora import StackedLora
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.slots import LoraBank
    from macaronic.testing import make_random_adapter

    base = load_base(tiny_dirs["llama"])
    g, s = LoraBank(base.args, 9, 4), StackedLora(base.args, 9, 4)
    for slot in (1, 3, 8):
        pairs = read_adapter(make_random_adapter(tmp_path / f"s{slot}", base.args, rank=4, seed=slot), base.args)[1]
        g.write(slot, pairs)
        s.write(slot, pairs)
    slots = torch.tensor([1, 3, 0, 8, 3])
    x = torch.randn(5, base.args.dim)
    for fused in ("qkv", "gate_up"):
        width = sum(b.shape[-1] for b in g.Bt[fused])
        yg, ys = torch.zeros(5, width), torch.zeros(5, width)
        g.add_delta(yg, 0, fused, x, g.plan(slots))
        s.add_delta(ys, 0, fused, x, s.plan(slots))
        assert yg.abs().max() > 0 and torch.allclose(yg, ys, atol=1e-6)


def test_bench_bases_fills_every_figure_and_the_rule_on_a_registered_tiny_base(tiny_dirs, tmp_path, monkeypatch):
    """`macaronic bench bases` on a registered base whose cached import is a tiny model (it has no
    packages, hence no GGUF: the llama.cpp columns are null whether llama.cpp is installed or not)."""
    import json
    import shutil
    from dataclasses import replace

    from macaronic.bench import bases as bench_bases
    from macaronic.commands import bench as bench_command
    from macaronic.engine import bases

    monkeypatch.setenv("MACARONIC_HOME", str(tmp_path / "home"))
    shutil.copytree(tiny_dirs["llama"], tmp_path / "home" / "bases" / "tiny")
    monkeypatch.setitem(bases.BASES, "tiny", replace(bases.get(None), name="tiny", packages=()))
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n")
    assert bench_command.bases(["--json", str(tmp_path / "b.json"), "--md", str(md), "--bases", "tiny",
                             "--history", "96", "--tokens", "4", "--reps", "1", "--threads", "1",
                             "--precisions", "int4,bf16"]) == 0
    r = json.loads((tmp_path / "b.json").read_text())
    row = r["bases"][0]
    for k in ("int4_decode_tok_s", "int4_decode_lora_tok_s", "bf16_decode_tok_s", "int4_prefill96_tok_s",
              "bf16_prefill96_tok_s", "int4_switch_ttft_ms", "int4_cleared_ttft_ms"):
        assert row[k] > 0, k
    assert row["llamacpp_decode_tok_s"] is None and row["int4_turn_prefill_tokens"] < 96
    assert row["rule_speed_ok"] == (row["int4_decode_tok_s"] >= 15 and row["int4_switch_ttft_ms"] < 1500)
    text = md.read_text()
    assert bench_bases.START in text and "| tiny |" in text
    # bf16 left out (the default where the CPU emulates bf16): its figures are null and shown as n/a
    assert bench_command.bases(["--json", str(tmp_path / "c.json"), "--md", str(md), "--bases", "tiny",
                             "--history", "96", "--tokens", "4", "--reps", "1", "--threads", "1",
                             "--precisions", "int4"]) == 0
    row = json.loads((tmp_path / "c.json").read_text())["bases"][0]
    assert row["int4_decode_tok_s"] > 0 and row["bf16_decode_tok_s"] is None and row["bf16_prefill96_tok_s"] is None
    assert "bf16 not measured" in md.read_text()
    with pytest.raises(SystemExit):
        bench_command.bases(["--json", str(tmp_path / "d.json"), "--bases", "tiny", "--precisions", "fp8"])



def test_a_run_without_the_peer_keeps_the_peer_section_measured_elsewhere(tmp_path, capsys):
    """`--only peer --md` where llama.cpp cannot run: the committed figures stay, and it says so."""
    doc = tmp_path / "B.md"
    kept = "## Decode against llama.cpp on the same GGUF\n\n<!-- bench-peer:start -->\n| 2 | 116.37 |\n<!-- bench-peer:end -->\n"
    doc.write_text(kept)
    r = {"command": "macaronic bench --only peer", "seconds": 1.0, "peer": {"llamacpp": False, "rows": []},
         "machine": {"cpu": "x", "cores": 2, "memory_gb": 1, "torch": "t"}}
    sections.write_markdown(doc, r)
    assert doc.read_text() == kept and "left as it was" in capsys.readouterr().err
    r["peer"] = {"llamacpp": True, "rows": [], "tokens": 4, "reps": 1}
    sections.write_markdown(doc, r)
    assert "116.37" not in doc.read_text()  # a run with figures replaces them


def test_benchmarks_write_markdown_only_where_they_are_told(monkeypatch, tmp_path):
    """Every `macaronic bench` command and study writes markdown only to a file `--md` names (it always
    prints it); without `--md` nothing under docs/ is touched. The JSON goes where `--json` says."""
    from macaronic.bench import bases as bench_bases
    from macaronic.bench import modes as bench_modes
    from macaronic.bench import vllm_peer
    from macaronic.commands import bench as bench_command

    seen = {}

    def keep(name):
        def run(a, *rest):
            seen[name] = a
            return 0
        return run

    monkeypatch.setattr(sections, "run", keep("bench"))
    monkeypatch.setattr(vllm_peer, "run", keep("vllm"))
    monkeypatch.setattr(bench_modes, "run", keep("modes"))
    monkeypatch.setattr(bench_bases, "run", keep("bases"))
    json_path = tmp_path / "x.json"
    bench_command.main(["--json", str(json_path), "--only", "lora"])
    bench_command.main(["vllm", "--json", str(json_path)])
    bench_command.main(["modes", "--json", str(json_path)])
    bench_command.main(["bases", "--json", str(json_path), "--bases", "smollm2-135m-instruct"])
    assert set(seen) == {"bench", "vllm", "modes", "bases"}
    assert all(a.md is None for a in seen.values())
    assert seen["modes"].png == tmp_path / "x.png"  # beside its JSON, not in docs/
    bench_command.main(["--json", str(json_path), "--only", "lora", "--md", str(tmp_path / "B.md")])
    assert seen["bench"].md == str(tmp_path / "B.md")


def test_bench_refuses_a_prompt_count_outside_humaneval(capsys):
    """`macaronic bench --prompts N` (the agreement section's HumanEval prompts) says what it takes."""
    from macaronic.commands import bench as bench_command

    for bad in ("0", "165"):
        with pytest.raises(SystemExit) as e:
            bench_command.main(["--only", "agreement", "--prompts", bad, "--json", "unused.json"])
        assert e.value.code == 2
        assert f"--prompts must be between 1 and 164 (HumanEval's problems), got {bad}" in capsys.readouterr().err


def test_bench_refuses_an_unknown_agreement_variant_and_passes_the_chosen_ones(capsys, monkeypatch):
    """`macaronic bench --variants` (which of our precisions the agreement section decodes) names the choices on
    a bad value, and reaches the section as a tuple."""
    from macaronic.bench import sections
    from macaronic.commands import bench as bench_command

    for bad in ("fp16", ",", "int4,q8"):
        with pytest.raises(SystemExit) as e:
            bench_command.main(["--only", "agreement", "--variants", bad, "--json", "unused.json"])
        assert e.value.code == 2
        assert "--variants: choose from fp32, int4, gguf" in capsys.readouterr().err
    seen = {}
    monkeypatch.setattr(sections, "run", lambda a, *rest: seen.setdefault("a", a) and 0)
    bench_command.main(["--only", "agreement", "--variants", "int4, gguf", "--json", "unused.json"])
    assert seen["a"].variants == ("int4", "gguf")


def test_vllm_section_renders_the_parts_it_measured(tmp_path, capsys):
    """`macaronic bench vllm --parts` measures some parts: the section shows those, the served column
    only when that server ran; the committed runs (the SmolLM2 one of 2026-12-01, before `--parts`,
    and the default base's) still render; a part or base it does not know is refused up front."""
    import json
    from pathlib import Path

    from macaronic.bench import vllm_peer
    from macaronic.commands import bench as bench_command

    common = {"command": "macaronic bench vllm", "seconds": 1.0, "base": "qwen2.5-coder-0.5b", "threads": 2,
              "tokens": 32, "machine": {"cpu": "CPU", "cores": 2}, "parts": ["decode"], "ignore_eos": True,
              "vllm": {"version": "0", "startup_s": 1, "settings": "s", "adapters": {"agent": {"rank": 8}, "genui": {"rank": 8}}},
              "macaronic": {"startup_s": 1}}
    decode = {f"{k}_{n}_{f}": v for k, x in (("macaronic", 10.0), ("vllm", 5.0), ("served", 30.0)) for n in (1, 16)
              for f, v in (("tok_s", x * n), ("mean_tokens", 32.0))}
    text = vllm_peer.markdown({**common, "decode": decode, "served": {"startup_s": 2, "precision": {"quant": "int4"}}})
    assert "| 10.0 | 5.0 | 2.0x | 30.0 | 6.0x |" in text and "| 160.0 | 80.0 | 2.0x | 480.0 | 6.0x |" in text
    assert "quant int4" in text and "32 tokens each, `ignore_eos`" in text
    assert "Switched-turn" not in text and "Adapter load" not in text
    only_load = vllm_peer.markdown({**common, "load": {"adapter": "genui", "vllm_load_ms": 1, "vllm_first_request_ms": 2,
                                                       "vllm_resident_request_ms": 3, "macaronic_register_ms": 4,
                                                       "macaronic_load_ms": 5}})
    assert "`genui` adapter" in only_load and "decode tokens/s" not in only_load and "as served" not in only_load
    root = Path(__file__).resolve().parents[2] / "docs" / "bench"
    old = vllm_peer.markdown(json.loads((root / "vllm.json").read_text()))
    assert "shared with other jobs" in old and "ignore_eos" not in old and "history last computed on `chat`" in old
    new = vllm_peer.markdown(json.loads((root / "vllm-qwen.json").read_text()))
    assert "nothing else running by intent" in new and "`ignore_eos`" in new and "Macaronic as served" in new
    for bad, said in ((["--parts", "decode,speed"], "--parts takes some of decode,switch,load"),
                      (["--base", "no-such-base"], "unknown base 'no-such-base'")):
        with pytest.raises(SystemExit) as e:
            bench_command.main(["vllm", "--json", str(tmp_path / "x.json"), *bad])
        assert e.value.code == 2 and said in capsys.readouterr().err
