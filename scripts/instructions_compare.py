"""Paired comparison of `macaronic probe instructions` runs, per set and pooled over the sets (the
hand-written instruction suite's set 1 and set 2): each row (model) of each file against that file's
`base` row, paired bootstrap over prompts (`contract.stats.paired_bootstrap`).

    .venv/bin/python scripts/instructions_compare.py docs/bench/external/instructions-qwen-chat-dpo2.json \\
        docs/bench/external/instructions2-qwen-chat-dpo2.json [--models chat,macaronic]
"""

from __future__ import annotations

import argparse
import json

from macaronic.contract.stats import paired_bootstrap


def passed(path: str) -> dict[str, dict[str, bool]]:
    rows = json.load(open(path))["categories"]["instructions"]["rows"]
    return {m: {r["id"]: bool(r["passed"]) for r in rs} for m, rs in rows.items()}


def line(name: str, cand: list[bool], base: list[bool]) -> str:
    d, ci = paired_bootstrap([float(x) for x in cand], [float(x) for x in base])
    won = sum(c and not b for c, b in zip(cand, base))
    lost = sum(b and not c for c, b in zip(cand, base))
    return (f"| {name} | {len(base)} | {sum(base) / len(base):.3f} | {sum(cand) / len(cand):.3f} | "
            f"{d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] | {won} / {lost} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="probe instructions JSON files, one per set")
    ap.add_argument("--models", default="chat,macaronic", help="rows to compare with base (those present)")
    a = ap.parse_args()
    runs = [(f, passed(f)) for f in a.files]
    print("| model, set | prompts | base | model | model − base [95%] | won / lost |")
    print("|---|---:|---:|---:|---|---|")
    for m in a.models.split(","):
        pooled_c, pooled_b, sets = [], [], 0
        for f, p in runs:
            if m not in p:
                continue
            ids = sorted(p["base"])
            c, b = [p[m][i] for i in ids], [p["base"][i] for i in ids]
            pooled_c += c
            pooled_b += b
            sets += 1
            print(line(f"{m}, {f.rsplit('/', 1)[-1]}", c, b))
        if sets > 1:
            print(line(f"{m}, pooled", pooled_c, pooled_b))


if __name__ == "__main__":
    main()
