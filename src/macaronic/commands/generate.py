"""`macaronic generate`: stream one reply from one adapter, for quick manual checks."""

from __future__ import annotations

import argparse
import json
import sys

from macaronic.engine.bases import BASE_HELP


def add_model_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--base", help=BASE_HELP)
    ap.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                    help="register a PEFT adapter directory (repeatable); default: the shipped specialists")


def load_from_args(a):
    from macaronic.engine.llm import load_base_llm

    return load_base_llm(a.base, a.adapter_dir)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="macaronic generate", description="Stream one reply from one adapter.")
    ap.add_argument("--prompt", required=True, help="the user message")
    ap.add_argument("--adapter", default=None, help="adapter name (default: the bare base)")
    ap.add_argument("--system", default=None, help="system prompt")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--stats", action="store_true", help="print usage statistics as JSON on stderr")
    add_model_args(ap)
    a = ap.parse_args(argv)
    from macaronic.engine.sampling import SamplingParams

    llm = load_from_args(a)
    if a.adapter is not None and a.adapter not in llm.adapters.names():
        print(f"macaronic generate: unknown adapter {a.adapter!r}; available: {llm.adapters.names()}", file=sys.stderr)
        return 2
    msgs = ([{"role": "system", "content": a.system}] if a.system else []) + [{"role": "user", "content": a.prompt}]
    try:
        sp = SamplingParams(max_tokens=a.max_tokens, temperature=a.temperature, top_p=a.top_p, seed=a.seed).validate()
        h = llm.submit(llm.encode_chat(msgs), a.adapter, sp)
    except ValueError as e:
        print(f"macaronic generate: {e}", file=sys.stderr)
        return 2
    last = None
    for ev in h:
        sys.stdout.write(ev.text)
        sys.stdout.flush()
        last = ev
    sys.stdout.write("\n")
    if last is not None and last.finish_reason == "error":
        print(f"macaronic generate: {last.error}", file=sys.stderr)
        return 1
    if a.stats and last is not None:
        print(json.dumps({**(last.usage or {}), "finish_reason": last.finish_reason}), file=sys.stderr)
    llm.close()
    return 0
