"""`macaronic info`: describe the base and the registered adapters."""

from __future__ import annotations

import argparse
import json


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="macaronic info", description="Describe the base model and its adapters.")
    ap.add_argument("--base", help="base model directory (default: the embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--adapter", action="append", default=[], metavar="DIR",
                    help="register this PEFT adapter directory (repeatable); default: the shipped specialists")
    ap.add_argument("--json", action="store_true", help="print JSON")
    a = ap.parse_args(argv)
    from macaronic.engine.llm import load_default_llm, load_llm

    llm = load_llm(a.base, a.adapter) if (a.base or a.adapter) else load_default_llm()
    d = llm.describe()
    if a.json:
        print(json.dumps(d, indent=2))
        return 0
    b = d["base"]
    print(f"base     {b['id']} ({b['family']}, {b['params'] / 1e6:.1f}M params)")
    print(f"         fingerprint {b['fingerprint']}")
    print(f"         {b['path']}")
    for ad in d["adapters"]:
        print(f"adapter  {ad['name']:<10} mode={ad['mode']:<5} rank={ad['rank']:<3} id={ad['id'][:16]}  "
              f"targets={','.join(ad['targets'])}")
    if not d["adapters"]:
        print("adapters (none)")
    return 0
