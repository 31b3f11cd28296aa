"""The greedy replies of a chat round against the bare base's on the prompts both sampled: how often each
passed every check, and how often each failed each check kind (`train sample-chat` rows: the base's in
train/data/chat_rs.jsonl, an adapter's in chat_rs_<id8>.jsonl). The rows are the training stream's, and
the base's were sampled under the chat instruction, the adapter's in its served layout: a look at what a
round gets wrong, not a held-out comparison (scripts/chat_heldout_compare.py is that).

    .venv/bin/python scripts/chat_round_compare.py src/macaronic/train/data/chat_rs_c77f86b2.jsonl
"""

from __future__ import annotations

import argparse
from collections import Counter

from macaronic.train.chat_rs import DATA, read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("round", help="an on-policy round's rows")
    ap.add_argument("--against", default=str(DATA), help="the rows to compare with (default: the bare base's)")
    a = ap.parse_args()
    other = {r["id"]: r for r in read(a.against) if r["samples"]}
    pairs = [(r, other[r["id"]]) for r in read(a.round) if r["samples"] and r["id"] in other]
    greedy = lambda r: r["samples"][0]["failed"]  # noqa: E731
    print(f"{len(pairs)} prompts sampled in both")
    print(f"greedy reply passed every check: round {sum(not greedy(r) for r, _ in pairs)}, "
          f"against {sum(not greedy(o) for _, o in pairs)}")
    mine, theirs = Counter(k for r, _ in pairs for k in greedy(r)), Counter(k for _, o in pairs for k in greedy(o))
    checked = Counter(c[0] for r, _ in pairs for c in r["checks"])
    print("| check | prompts with it | round fails | against fails |")
    print("|---|---:|---:|---:|")
    for k in sorted(set(mine) | set(theirs), key=lambda k: -(mine[k] + theirs[k])):
        print(f"| {k} | {checked.get(k, '-')} | {mine[k]} | {theirs[k]} |")


if __name__ == "__main__":
    main()
