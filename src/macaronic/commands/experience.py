"""`macaronic experience export FILE --out X.jsonl` and `macaronic experience forget FILE
[--before DATE | --all]`: the served-experience file that `macaronic serve --experience FILE` records
(serve/experience.py). Both work on the local file only; nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic experience",
                                description="Export or forget what `macaronic serve --experience FILE` recorded "
                                            "(per turn: route, pair, grammar, repairs, tool errors, what the client "
                                            "did next, feedback). Local files only.")
    sub = p.add_subparsers(dest="action", required=True)
    e = sub.add_parser("export", help="write the records as JSON lines (one per turn, its follow-ups and feedback)")
    e.add_argument("file")
    e.add_argument("--out", required=True, help="the .jsonl file to write")
    f = sub.add_parser("forget", help="delete records, then vacuum the file so they leave it")
    f.add_argument("file")
    when = f.add_mutually_exclusive_group(required=True)
    when.add_argument("--before", metavar="DATE", type=datetime.fromisoformat,
                      help="delete what was recorded before DATE (ISO 8601, local time: 2026-12-04, "
                           "2026-12-04T15:30)")
    when.add_argument("--all", action="store_true", help="delete everything")
    return p


def main(argv: list[str]) -> int:
    from macaronic.serve.experience import ExperienceError, export, forget

    a = parser().parse_args(argv)
    try:
        if a.action == "export":
            n = export(a.file, a.out)
            print(f"{n} records -> {a.out}")
        else:
            n = forget(a.file, None if a.all else a.before.timestamp())
            print(f"forgot {n['turns']} turns, {n['events']} follow-ups, {n['feedback']} feedback rows from {a.file}")
    except (ExperienceError, OSError) as e:
        print(f"macaronic experience: {e}", file=sys.stderr)
        return 2
    return 0
