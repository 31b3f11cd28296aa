"""The sections of `macaronic bench` (commands/bench.py): run the engine benchmarks, write JSON and print
the tables (and write them into a markdown file only when `--md FILE` names one)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


START, END = "<!-- bench:start -->", "<!-- bench:end -->"
SECTIONS = ("switch", "adapters", "decode", "lora", "int4", "peer", "prefill", "structured", "serve", "precision",
            "routing", "load-and-abuse", "first-request", "training", "alora",
            "agreement")
ENGINE_KEYS = ("switch_ttft", "adapters", "decode", "prefill", "structured")  # the engine block's results


def run(a, argv: list[str], sections: set[str]) -> int:
    """Measure `sections` with the options of `macaronic bench` (`a`: commands/bench.py parses them),
    write the JSON and the markdown, print the tables."""
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)

    from rich.progress import Progress

    from macaronic.bench import machine, serving, suite
    from macaronic.engine.base import load_base
    from macaronic.engine.bases import precision_env

    lengths = (512, 2048) if a.quick else (512, 2048, 4096)
    reps = getattr(a, "reps", None) or (1 if a.quick else 3)
    t0 = time.time()
    base = load_base(a.base)
    result: dict = {
        # the precision is part of the command (as `eval report-only` writes it)
        "command": "".join(f"{k}={v} " for k, v in precision_env().items()) + "macaronic bench " + " ".join(argv),
        "machine": machine.describe(),
        "base": {"id": base.name, "fingerprint": base.fingerprint, "params": base.params()},
        "quick": a.quick,
    }
    with tempfile.TemporaryDirectory(prefix="macaronic-bench-") as tmp, Progress(transient=False) as prog:
        work = Path(tmp)
        if "switch" in sections:
            task = prog.add_task("switched-turn TTFT", total=len(lengths) * reps)
            result["switch_ttft"] = suite.switch_ttft(base, work / "switch", lengths, reps,
                                                      progress=lambda: prog.advance(task))
        if "adapters" in sections:
            task = prog.add_task("adapter switch/load (4, 400)", total=1)
            result["adapters"] = suite.adapter_latency(base, work / "adapters", rank=16)
            prog.advance(task)
        if "decode" in sections:
            n_tok = 24 if a.quick else 48
            task = prog.add_task("decode throughput (fp32, bf16, int8, int4)", total=5 + len(suite.PRECISIONS))
            result["decode"] = suite.decode_throughput(base, work / "decode", tokens=n_tok, reps=reps)
            prog.advance(task, 5)
            for name in suite.PRECISIONS:
                result[f"decode_{name}"] = suite.decode_precision(base.path, work / "decode", name, tokens=n_tok,
                                                                  reps=reps)
                prog.advance(task)
            result["precision"] = suite.precision_accuracy(base, tokens=64 if a.quick else 128)
        if "lora" in sections:
            from macaronic.bench import lora

            task = prog.add_task("LoRA overhead, grouped vs stacked bank", total=1)
            result["lora"] = lora.lora_overhead(base.path, work / "lora", {"fp32": ("float32", "none"), **suite.PRECISIONS},
                                                reps=8 if a.quick else 20)
            prog.advance(task)
        if "int4" in sections:
            from macaronic.bench import int4

            task = prog.add_task("int4: native kernel vs copy path vs torch, steps, memory", total=1)
            result["int4"] = int4.run(base.path, work / "int4", quick=a.quick)
            prog.advance(task)
        if "peer" in sections:
            from macaronic.bench import peer

            threads = (a.threads,) if a.threads else (1, 2)
            task = prog.add_task("decode vs llama.cpp (1 and 16 streams)", total=len(threads) * reps)
            result["peer"] = peer.run(base.path, work / "peer", threads=threads, reps=reps,
                                      progress=lambda: prog.advance(task))
        if "prefill" in sections:
            task = prog.add_task("prefill throughput", total=1)
            result["prefill"] = suite.prefill_throughput(base)
            prog.advance(task)
        if "structured" in sections:
            from macaronic.bench.structured import structured_cost

            task = prog.add_task("constrained decoding cost", total=1)
            result["structured"] = structured_cost(base.path, tokens=24 if a.quick else 32, reps=reps)
            prog.advance(task)
        if "serve" in sections:
            rounds = 3 if a.quick else 6
            variants = serving.default_variants(rounds, a.quick)
            task = prog.add_task("serving: 32 streams x 32 tokens, rounds per variant", total=sum(v[3] for v in variants))
            server_args = ["--base", a.base] if a.base else []
            result["serve"] = serving.serving_variants(variants, streams=32, tokens=32, server_args=server_args,
                                                       threads=a.threads, progress=lambda: prog.advance(task))
        if "precision" in sections:
            rounds = 3 if a.quick else 5
            task = prog.add_task("serving per precision: 32 streams x 32 tokens", total=4 * rounds)
            server_args = ["--base", a.base] if a.base else []
            result["serve_precision"] = serving.serving_variants(serving.precision_variants(rounds), streams=32, tokens=32,
                                                                 server_args=server_args, threads=a.threads,
                                                                 progress=lambda: prog.advance(task))
        if "routing" in sections:
            from macaronic.bench import routing

            task = prog.add_task("routing: TTFT added, streams stalled, tools attached", total=3)
            result["routing"] = routing.routing_cost(threads=a.threads, quick=a.quick,
                                                     progress=lambda: prog.advance(task))
        if "load-and-abuse" in sections:
            from macaronic.bench import abuse

            task = prog.add_task("load and abuse: another client's TTFT and gaps under each attack",
                                 total=len(abuse.ATTACKS) + 2)
            result["abuse"] = abuse.load_and_abuse(a.base, quick=a.quick, threads=a.threads,
                                                   progress=lambda: prog.advance(task))
        if "first-request" in sections:
            from macaronic.bench import first

            cold = not a.quick  # --quick: the warmed-up servers only
            task = prog.add_task("first request vs warm ones, fresh servers", total=len(first.KINDS) * (1 + cold))
            server_args = ["--base", a.base] if a.base else []
            result["first_request"] = first.run(server_args, warm=2 if a.quick else 4, cold=cold, threads=a.threads,
                                                progress=lambda: prog.advance(task))
        if "training" in sections:
            from macaronic.bench import training

            precisions = ("none", "bfloat16")
            task = prog.add_task("LoRA SFT: ours vs transformers + PEFT", total=len(precisions) * len(training.RECIPES))
            result["training"] = training.run(a.base, work / "training", steps=3 if a.quick else 6,
                                              batch=2 if a.quick else 4, threads=a.threads, precisions=precisions,
                                              reps=1, progress=lambda: prog.advance(task))
        if "alora" in sections:
            from macaronic.bench import alora_peer

            task = prog.add_task("switched turns vs llama.cpp's Activated LoRA", total=len(lengths) * reps)
            result["alora"] = alora_peer.run(a.base, work / "alora", lengths, reps, threads=a.threads or 2,
                                             progress=lambda: prog.advance(task), log=prog.console.print)
        if "agreement" in sections:
            from macaronic.bench import llamacpp_agreement

            n = a.prompts or (4 if a.quick else 8)
            variants = getattr(a, "variants", tuple(llamacpp_agreement.VARIANTS))
            task = prog.add_task("greedy agreement with llama.cpp", total=n * len(llamacpp_agreement.REFERENCES) + len(variants))
            result["agreement"] = llamacpp_agreement.run(a.base, work / "agreement", prompts=n, variants=variants,
                                                         tokens=64 if a.quick else 512, threads=a.threads or 2,
                                                         progress=lambda: prog.advance(task), log=prog.console.print)
    result["router"] = _router_latency(a.route_json)
    result["seconds"] = round(time.time() - t0, 1)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    if a.md:
        write_markdown(Path(a.md), result)
    if any(k in result for k in ENGINE_KEYS):
        print(markdown(result))
    for key, *_ in OWN_BLOCKS:
        if result.get(key):
            print(own_markdown(result, key))
    return 0


def _router_latency(path: str | None) -> dict | None:
    if not path or not Path(path).exists():
        return None
    data = json.loads(Path(path).read_text())
    return {name: {"p50_ms": p.get("p50_ms"), "p95_ms": p.get("p95_ms")} for name, p in data.get("policies", {}).items()}


def _fmt(x) -> str:
    return "n/a" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))


def markdown(r: dict) -> str:
    m = r["machine"]
    out = [
        f"Command: `{r['command']}` ({r['seconds']} s). Machine: {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gb']} GB, measured copy bandwidth {m['memory_bandwidth_gbs']} GB/s, torch {m['torch']}, "
        f"threads: {m['torch_threads']}. Base: {r['base']['id']} ({r['base']['params'] / 1e6:.0f}M params, fp32).",
        "",
    ]
    if "switch_ttft" in r:
        out += ["### Switched-turn time to first token (ms, median)", "",
                "History computed on adapter A, next turn on adapter B (rank 8, all 7 projections).", "",
                "| history tokens | turn mode | per-adapter cache (vLLM rule) | cache cleared (llama.cpp rule) | transformers + PEFT | cleared / turn |",
                "|---:|---:|---:|---:|---:|---:|"]
        for row in r["switch_ttft"]:
            out.append(f"| {row['history_tokens']} | {_fmt(row['turn_ms'])} | {_fmt(row['per_adapter_ms'])} | "
                       f"{_fmt(row['cleared_ms'])} | {_fmt(row['peft_ms'])} | {row['cleared_over_turn']}x |")
        out.append("")
    if "adapters" in r:
        ad = r["adapters"]
        out += ["### Adapters", "", "| registered | switch (µs) | load disk→slot (ms) | register (ms) |", "|---:|---:|---:|---:|",
                f"| 4 | {_fmt(ad['switch_us'])} | {_fmt(ad['load_ms'])} | {_fmt(ad['register_ms'])} |",
                f"| 400 | {_fmt(ad['switch_us_400'])} | {_fmt(ad['load_ms_400'])} | {_fmt(ad['register_ms_400'])} |", "",
                f"Bytes per resident adapter slot: {ad['bytes_per_adapter']:,} (padded to rank {ad['slot_rank']}); "
                f"file size of a rank-{ad['adapter_rank']} fp32 adapter: {ad['file_bytes_per_adapter']:,}.", ""]
    if "decode" in r:
        d = r["decode"]
        out += ["### Decode throughput (tokens/s, aggregate)", "",
                "| 1 stream | 1 stream, base | 4 mixed | 16 mixed | 16 base-only | LoRA overhead @16 | llama.cpp 1 | llama.cpp 16 |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|",
                f"| {_fmt(d['single_tok_s'])} | {_fmt(d['base_single_tok_s'])} | {_fmt(d['mixed4_tok_s'])} | "
                f"{_fmt(d['mixed16_tok_s'])} | {_fmt(d['base16_tok_s'])} | {d['lora16_overhead_pct']}% | "
                f"{_fmt(d['llamacpp_single_tok_s'])} | {_fmt(d['llamacpp16_tok_s'])} |"]
        for name in ("bf16", "int8", "int4"):
            if r.get(f"decode_{name}"):
                b = r[f"decode_{name}"]
                out.append(f"| {name}: {_fmt(b['single_tok_s'])} | {_fmt(b['base_single_tok_s'])} | {_fmt(b['mixed4_tok_s'])} | "
                           f"{_fmt(b['mixed16_tok_s'])} | {_fmt(b['base16_tok_s'])} | {b['lora16_overhead_pct']}% | | |")
        if r.get("precision"):
            pa = r["precision"]
            out += ["", f"Accuracy against fp32 on {pa['tokens']} tokens of text decoded one token at a time "
                    f"(fp32 NLL {pa['fp32_nll']}):", "", "| precision | top-1 agreement | KL(fp32‖it) | NLL |",
                    "|---|---:|---:|---:|"]
            out += [f"| {k} | {pa[k]['top1_agree']} | {pa[k]['kl']} | {pa[k]['nll']} |" for k in ("bf16", "int8", "int4")]
        out += ["", "First row fp32 weights; bf16: bf16 weights and activations (oneDNN, AMX/AVX-512 bf16 for many "
                "rows); int8/int4: bf16 plus weight-only int8 (per channel) / int4 (groups of 32) kernels for calls "
                "of up to 4 rows, with exact top-64 rescoring of the int4 LM head (`--quant`, "
                "`macaronic.engine.quant`).", ""]
    if "prefill" in r:
        p = r["prefill"]
        out += ["### Prefill throughput (tokens/s)", "", "| tokens | Macaronic fp32 | Macaronic bf16 | llama.cpp |",
                "|---:|---:|---:|---:|"]
        for n in (512, 2048):
            if f"prefill{n}_tok_s" in p:
                out.append(f"| {n} | {_fmt(p[f'prefill{n}_tok_s'])} | {_fmt(p.get(f'bf16_prefill{n}_tok_s'))} | "
                           f"{_fmt(p[f'llamacpp_prefill{n}_tok_s'])} |")
        out.append("")
    if r.get("structured"):
        from macaronic.bench.structured import markdown as structured_md

        out += structured_md(r["structured"])
    if r.get("router"):
        out += ["### Router latency (ms)", "", "| policy | p50 | p95 |", "|---|---:|---:|"]
        out += [f"| {k} | {_fmt(v['p50_ms'])} | {_fmt(v['p95_ms'])} |" for k, v in r["router"].items()]
        out.append("")
    out.append("llama.cpp: llama-cpp-python (the optional `bench` extra) on the same Q4_1 GGUF, greedy, the same "
               "threads, its extra buffer types (weight repacking, AMX) off because their AMX path faults on this "
               "VM. n/a: the peer is not installed, or the base is not SmolLM2-135M (the peer loads its GGUF).")
    return "\n".join(out)


# Sections with a block of their own in the markdown file: (result key, markers, title, renderer module).
OWN_BLOCKS = (("serve", "<!-- bench-serve:start -->", "<!-- bench-serve:end -->", "Serving under 32 concurrent streams",
               "macaronic.bench.serving"),
              ("routing", "<!-- bench-routing:start -->", "<!-- bench-routing:end -->", "What routing costs",
               "macaronic.bench.routing"),
              ("int4", "<!-- bench-int4:start -->", "<!-- bench-int4:end -->", "int4 without a bf16 copy: the native kernel",
               "macaronic.bench.int4"),
              ("lora", "<!-- bench-lora:start -->", "<!-- bench-lora:end -->", "LoRA overhead at 16 mixed streams",
               "macaronic.bench.lora"),
              ("serve_precision", "<!-- bench-serve-precision:start -->", "<!-- bench-serve-precision:end -->",
               "Served speed per precision (the speed half of the served-precision rule)", "macaronic.bench.serving"),
              ("abuse", "<!-- bench-abuse:start -->", "<!-- bench-abuse:end -->", "Load and abuse: one client's attack, "
               "another client's latency", "macaronic.bench.abuse"),
              ("first_request", "<!-- bench-first-request:start -->", "<!-- bench-first-request:end -->",
               "The first request against warm ones", "macaronic.bench.first"),
              ("training", "<!-- bench-training:start -->", "<!-- bench-training:end -->",
               "Training throughput: ours against transformers + PEFT", "macaronic.bench.training"),
              ("alora", "<!-- bench-alora:start -->", "<!-- bench-alora:end -->",
               "Switched turns against llama.cpp's Activated LoRA", "macaronic.bench.alora_peer"),
              ("agreement", "<!-- bench-agreement:start -->", "<!-- bench-agreement:end -->",
               "Greedy agreement with llama.cpp on the same GGUF", "macaronic.bench.llamacpp_agreement"),
              ("peer", "<!-- bench-peer:start -->", "<!-- bench-peer:end -->", "Decode against llama.cpp on the same GGUF",
               "macaronic.bench.peer"))


def own_markdown(r: dict, key: str) -> str:
    import importlib

    module = next(b[4] for b in OWN_BLOCKS if b[0] == key)
    m = r["machine"]
    head = (f"Command: `{r['command']}` ({r['seconds']} s). Machine: {m['cpu']}, {m['cores']} cores, "
            f"{m['memory_gb']} GB, torch {m['torch']}, load average at the start {m.get('load', 'n/a')}.")
    return "\n".join([head, "", *importlib.import_module(module).markdown(r[key])])


def write_markdown(path: Path, r: dict) -> None:
    """The engine block when an engine section ran, and each own-block section that ran."""
    from macaronic.bench.docs import write_section

    if any(k in r for k in ENGINE_KEYS):
        write_section(path, START, END, "Engine benchmarks", markdown(r))
    for key, start, end, title, _ in OWN_BLOCKS:
        if key == "peer" and r.get(key) and not r[key].get("llamacpp"):
            # no llama.cpp here: a section measured where it ran is kept, not replaced by "no figures"
            print(f"{path}: the llama.cpp peer did not run, its section is left as it was", file=sys.stderr)
            continue
        if r.get(key):
            write_section(path, start, end, title, own_markdown(r, key))

