"""How far each screened candidate of an evolve run moved from its parent on dev: per candidate pair,
the dev units it shares with the run's first champion, how many scored differently and how many
transcripts differ at all (the run's `dev.jsonl`, committed for run-r1).

    python scripts/evolve_dev_diff.py docs/evolve/run-r1/work/dev.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dev", type=Path, help="an evolve workdir's dev.jsonl")
    args = p.parse_args()
    by: dict[str, dict] = {}
    for line in args.dev.read_text().splitlines():
        r = json.loads(line)
        by.setdefault(r["pair"][:12], {})[(r["suite"], r["task"], r.get("sample"))] = (r["score"], json.dumps(r["messages"]))
    first, *rest = by
    print(f"{'pair':<14}{'shared units':>14}{'scores differ':>15}{'transcripts differ':>20}")
    for pair in rest:
        shared = set(by[pair]) & set(by[first])
        scores = sum(by[pair][k][0] != by[first][k][0] for k in shared)
        texts = sum(by[pair][k][1] != by[first][k][1] for k in shared)
        print(f"{pair:<14}{len(shared):>14}{scores:>15}{texts:>20}")


if __name__ == "__main__":
    main()
