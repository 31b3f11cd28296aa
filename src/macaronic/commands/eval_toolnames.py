"""`macaronic eval toolnames ROWS.jsonl ...`: per file and suite, invented tools, bad arguments,
calls per episode and the mean score of evaluated episodes (contract/toolnames.py counts)."""

from __future__ import annotations

import argparse
import json


def main(argv: list[str]) -> int:
    from macaronic.contract import toolnames

    p = argparse.ArgumentParser(prog="macaronic eval toolnames", description=toolnames.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", nargs="+", metavar="ROWS.jsonl", help="per-task rows of `macaronic eval` or `eval ablate`")
    a = p.parse_args(argv)
    for path in a.rows:
        rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
        print(json.dumps({"file": path, "suites": toolnames.summarize(rows)}))
    return 0
