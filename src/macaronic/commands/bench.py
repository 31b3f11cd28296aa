"""`macaronic bench` and its studies `bench vllm`, `bench modes`, `bench bases`: argument parsing only;
the measurements are bench/sections.py, bench/vllm_peer.py, bench/modes.py and bench/bases.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from macaronic.bench.sections import SECTIONS
from macaronic.engine.bases import BASES, SMALL_BASE

# Benchmarks write where they are told: JSON to --json, markdown to stdout and, only when named, --md.
MD_HELP = ("also write {what} into this markdown file, between its own markers (appended when absent); "
           "nothing is written unless given (the markdown is always printed)")


def main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in STUDIES:
        return STUDIES[argv[0]](argv[1:])
    ap = argparse.ArgumentParser(
        prog="macaronic bench",
        description="Measure switched-turn TTFT (turn mode vs per-adapter cache vs cleared cache vs "
        "transformers+PEFT), adapter switch/load latency at 4 and 400 adapters, decode and prefill "
        "throughput, side by side in one run on the embedded default base; constrained-decoding cost; and a "
        "`macaronic serve` under rounds of 32 concurrent streams (TTFT and inter-token gap p99 per precision and "
        "prefill budget, RSS per round); what routing adds to TTFT and the decoding streams it stalls; "
        "another client's TTFT and gaps while one client attacks (load-and-abuse: a long prompt, a compile storm, "
        "n=8 disconnects, many tools); the first request's TTFT beside warm ones on fresh servers (first-request); LoRA SFT throughput against "
        "transformers' Trainer + PEFT on the same examples (training); switched-turn TTFT against llama.cpp's own "
        "server with the same adapters as Activated LoRA and as plain LoRA (alora: builds llama-server from the "
        "pinned source the first time, `macaronic llamacpp build`); greedy replies against that server on "
        "the same GGUF, per precision (agreement). "
        "`macaronic bench vllm --help`: a real vLLM as a peer. `macaronic bench modes --help`: quality vs switch cost "
        "of the adapter-switch rules (full, turn/cached, turn/base, upper-k). `macaronic bench bases --help`: the "
        "registered bases side by side.",
    )
    ap.add_argument("--json", required=True, metavar="FILE", help="write the results here")
    ap.add_argument("--quick", action="store_true", help="fewer lengths and repetitions (< 10 minutes)")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions of the sections that repeat (default 3; 1 with --quick)")
    ap.add_argument("--md", default=None, metavar="FILE", help=MD_HELP.format(what="the sections that ran"))
    ap.add_argument("--base", default=SMALL_BASE,
                    help=f"a registered base ({', '.join(BASES)}) or a model directory; default {SMALL_BASE}, the base "
                         "of every published engine figure (another base's llama.cpp rows in the engine section are left "
                         "out; the peer, alora and agreement sections load any registered base's GGUF; `macaronic bench "
                         "bases` compares the bases)")
    ap.add_argument("--prompts", type=int, default=None, metavar="N",
                    help="agreement: the first N HumanEval prompts (default 8; 4 with --quick; issue 40's goal counts 40)")
    ap.add_argument("--variants", default="fp32,int4,gguf", metavar="LIST",
                    help="agreement: which of our precisions decode beside llama.cpp, comma list of fp32, int4, gguf "
                         "(default all three; int4 alone takes a few minutes at 40 prompts, all three about 50)")
    ap.add_argument("--route-json", default=None, help="a `macaronic route bench` JSON to take router latency from")
    ap.add_argument("--only", default=None, help=f"comma list of sections: {','.join(SECTIONS)} (load: an alias of serve)")
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads for Macaronic and llama.cpp alike (default: torch's, usually all cores). "
                         "On a shared machine use 1: llama.cpp's OpenMP threads spin badly when a core is busy")
    a = ap.parse_args(argv)
    from macaronic.bench.llamacpp_agreement import VARIANTS

    a.variants = tuple(v.strip() for v in a.variants.split(",") if v.strip())
    if not a.variants or set(a.variants) - set(VARIANTS):
        ap.error(f"--variants: choose from {', '.join(VARIANTS)}, got {','.join(a.variants) or 'none'}")
    from macaronic.bench.sections import run

    sections = set((a.only or ",".join(SECTIONS)).split(","))
    if "load" in sections:  # the two 32-stream benchmarks are one section now
        sections = (sections - {"load"}) | {"serve"}
    unknown = sections - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    if a.prompts is not None and not 1 <= a.prompts <= 164:
        ap.error(f"--prompts must be between 1 and 164 (HumanEval's problems), got {a.prompts}")
    return run(a, argv, sections)


def vllm(argv: list[str]) -> int:
    """`macaronic bench vllm`."""
    from macaronic.bench import vllm_peer

    ap = argparse.ArgumentParser(prog="macaronic bench vllm", description=vllm_peer.__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True, metavar="FILE", help="write the results here")
    ap.add_argument("--md", default=None, metavar="FILE", help=MD_HELP.format(what="the vLLM section"))
    ap.add_argument("--threads", type=int, default=1, help="cores for each engine (vLLM bound to cores 0..N-1, "
                                                           "Macaronic pinned there with N torch threads; default 1)")
    ap.add_argument("--quick", action="store_true", help="512/2k history only, 1 repetition")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per decode stream, each exactly this long "
                                                           "(`ignore_eos`; default 64)")
    ap.add_argument("--base", default=None, help="a registered base with at least two shipped adapters "
                                                 "(default: the default base)")
    ap.add_argument("--parts", default=None, metavar="LIST",
                    help=f"which measurements, comma-separated: {','.join(vllm_peer.PARTS)} (default: all)")
    ap.add_argument("--no-served", dest="served", action="store_false",
                    help="leave out the third server: Macaronic on the registered base at its served precision "
                         "(int4 on the default base's GGUF), beside the bf16 pair")
    a = ap.parse_args(argv)
    try:
        vllm_peer.parse_parts(a.parts)
        if a.base is not None:
            from macaronic.engine import bases

            bases.get(a.base)
    except (ValueError, KeyError) as e:
        ap.error(str(e).strip("'\""))
    return vllm_peer.run(a, argv)


def modes_parser() -> argparse.ArgumentParser:
    from macaronic.bench import modes as module

    p = argparse.ArgumentParser(prog="macaronic bench modes", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("runs/modes"), help="adapter sets and evaluations go here")
    p.add_argument("--steps-frac", type=float, default=0.2,
                   help="SFT steps per specialist under its rule, as a fraction of the shipped recipe's")
    p.add_argument("--lanes", type=int, default=3,
                   help="adapter sets trained and scored at a time (one process each, each in its own session)")
    p.add_argument("--train-only", action="store_true", help="train the missing specialists and stop")
    p.add_argument("--cost-only", action="store_true", help="measure the switch cost only (no training, no scores)")
    p.add_argument("--report-only", action="store_true",
                   help="no training or scoring: report what the evaluations under --work hold now (a rule still "
                   "being scored enters with its finished tasks; every comparison is over the tasks all rules have)")
    p.add_argument("--contract", type=Path, default=module.ROOT / "contracts/macaronic-core-v4.yaml")
    p.add_argument("--workers", type=int, default=8, help="units answered concurrently per evaluation")
    p.add_argument("--router-policy", default="head",
                   help="routing policy for every rule (default head: it reads the bare base only, so every rule "
                   "routes alike and the shipped router state, bound to the shipped adapters' ids, still loads)")
    p.add_argument("--lengths", default="512,2048,4096", help="history lengths of the switch-cost measurement")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the switch-cost measurement")
    p.add_argument("--reuse-cost", type=Path, default=None, metavar="JSON",
                   help="take the switch cost from this earlier `--cost-only` JSON instead of measuring again")
    p.add_argument("--json", type=Path, required=True, metavar="FILE", help="write the results here")
    p.add_argument("--png", type=Path, default=None, help="the quality-vs-cost plot (default: the JSON's path, .png)")
    p.add_argument("--md", default=None, metavar="FILE",
                   help=MD_HELP.format(what="the section for this JSON (markers named after it)"))
    p.add_argument("--title", default="Adapter-switch rules: quality vs switch cost", help="that section's title")
    return p


def modes(argv: list[str]) -> int:
    """`macaronic bench modes`."""
    from macaronic.bench import modes as module

    a = modes_parser().parse_args(argv)
    if a.png is None:
        a.png = a.json.with_suffix(".png")
    return module.run(a, list(argv))


def bases(argv: list[str]) -> int:
    """`macaronic bench bases`."""
    import torch

    from macaronic.bench import bases as module

    from macaronic.engine import bases

    ap = argparse.ArgumentParser(prog="macaronic bench bases", description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True, type=Path)
    ap.add_argument("--md", default=None, metavar="FILE", help=MD_HELP.format(what="the bench-bases section"))
    ap.add_argument("--bases", default=None, help=f"comma list (default: every installed one of {', '.join(bases.BASES)})")
    ap.add_argument("--threads", type=int, default=2, help="torch (and llama.cpp) threads (default 2, as the rule says)")
    ap.add_argument("--history", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=32, help="decode tokens per timing")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--precisions", default=None,
                    help="comma list of int4,bf16 (int4 is always measured: the rule reads it). Default: both where "
                         "the CPU computes bf16 natively (AVX512-BF16 or AMX); int4 alone where it emulates bf16 "
                         "(AVX2), whose bf16 rows take tens of minutes")
    a = ap.parse_args(argv)
    if a.precisions is None:
        from macaronic.engine.native import cpu_bf16

        a.precisions = ["int4", "bf16"] if cpu_bf16() else ["int4"]
    else:
        a.precisions = [p.strip() for p in a.precisions.split(",") if p.strip()]
        bad = sorted(set(a.precisions) - set(module.PRECISIONS))
        if bad:
            ap.error(f"--precisions: unknown {', '.join(bad)} (choose from {', '.join(module.PRECISIONS)})")
    names = a.bases.split(",") if a.bases else [n for n, s in bases.BASES.items() if bases.installed(s)]
    for n in names:
        bases.get(n)  # an unknown name is a clear error before anything loads
    threads_before = torch.get_num_threads()
    torch.set_num_threads(a.threads)
    try:
        return module.run(a, names, argv)
    finally:
        torch.set_num_threads(threads_before)


STUDIES = {"vllm": vllm,  # vLLM as a peer: its own options
           "modes": modes,  # the adapter-switch rules study: trains, scores, measures
           "bases": bases}  # every registered base's fast path, side by side
