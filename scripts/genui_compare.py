"""Paired comparison of `macaronic genui probe` runs on the hand-written GenUI requests (the
BENCHMARKS GenUI table): expected components present (all requests) and request values shown (the
requests that give values), each candidate against the first file, paired bootstrap over requests.

    .venv/bin/python scripts/genui_compare.py docs/bench/external/genui-probe-qwen-base-62.json \\
        docs/bench/external/genui-probe-qwen-shipped-62.json docs/bench/external/genui-probe-qwen-engine-62.json
"""

from __future__ import annotations

import json
import sys

from macaronic.contract.stats import paired_bootstrap


def rows(path: str) -> dict[str, dict]:
    return {r["id"]: r for r in json.load(open(path))["rows"]}


def _num(v) -> float | None:
    return None if v in (None, "None") else float(v)


def main(ref: str, *others: str) -> None:
    base = rows(ref)
    for path in (ref, *others):
        cand = rows(path)
        line = [path.rsplit("/", 1)[-1]]
        for key in ("coverage", "shows"):
            ids = [i for i in base if _num(base[i].get(key)) is not None and _num(cand[i].get(key)) is not None]
            c, b = [_num(cand[i][key]) for i in ids], [_num(base[i][key]) for i in ids]
            d, ci = paired_bootstrap(c, b)
            line.append(f"{key} {sum(c) / len(c):.3f} (n {len(ids)})" +
                        ("" if path == ref else f" {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"))
        s = json.load(open(path))["summary"]
        line.append(f"raw valid {s['raw_valid']:.3f}, length cut {s['length_cut']:.3f}, fallback {s['fallback']:.3f}")
        print(" | ".join(line))


if __name__ == "__main__":
    main(*sys.argv[1:])
