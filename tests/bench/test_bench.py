"""The benchmark functions run end to end on a tiny model and fill every field (no timing asserted)."""

from __future__ import annotations

import json

from macaronic.bench import cli, suite
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
    assert dec["llamacpp_single_tok_s"] is None or dec["llamacpp_single_tok_s"] > 0


def test_markdown_section_is_replaced_in_place(tmp_path):
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n\nintro\n\n<!-- bench:start -->\nold\n<!-- bench:end -->\n\n## Routing\nkept\n")
    r = {"command": "macaronic bench --quick", "seconds": 1.0, "quick": True,
         "machine": {"cpu": "x", "cores": 2, "memory_gb": 1, "memory_bandwidth_gbs": 1, "torch": "t", "torch_threads": 2},
         "base": {"id": "b", "params": 1e6}, "router": None,
         "prefill": {"prefill512_tok_s": 1.0, "llamacpp_prefill512_tok_s": None}}
    cli.write_markdown(md, r)
    text = md.read_text()
    assert "old" not in text and "## Routing\nkept" in text and "Prefill throughput" in text
    json.dumps(r)


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
        assert 0.5 <= acc[name]["top1_agree"] <= 1.0 and acc[name]["kl"] >= 0
    assert acc["int4"]["kl"] > acc["bf16"]["kl"]  # coarser weights, larger divergence
