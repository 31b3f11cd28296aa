"""`macaronic pair`: register, show and diff model-harness pairs recorded in a lineage database.

Prints only; the lineage and manifest logic lives in pairs/lineage.py and pairs/ids.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP
from macaronic.pairs.ids import PairManifest, diff
from macaronic.pairs.lineage import Lineage, LineageError, default_lineage


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="macaronic pair",
        description="Model-harness pairs: base fingerprint + adapter ids by role + harness bundle id "
                    "-> pair id. A pair is referred to by its id, a unique id prefix, or an alias "
                    "(champion, challenger) from the lineage database.")
    p.add_argument("--lineage", type=Path, default=None,
                   help="lineage SQLite file (default: $MACARONIC_LINEAGE or $MACARONIC_HOME/lineage.sqlite)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="print a pair's parts, lineage records and aliases")
    s.add_argument("ref", help="pair id, prefix or alias")
    s.add_argument("--json", action="store_true", help="print the manifest and records as JSON")
    d = sub.add_parser("diff", help="explain what differs between two pairs")
    d.add_argument("a")
    d.add_argument("b")
    r = sub.add_parser("register", help="hash a base, adapters and a harness into a pair and record it")
    r.add_argument("--base", default=None, help=BASE_HELP)
    r.add_argument("--adapter", action="append", default=[], metavar="ROLE=DIR", help="one per role")
    r.add_argument("--harness", default=None, help="harness bundle directory (default: the shipped one)")
    r.add_argument("--alias", choices=["champion", "challenger"], default=None, help="point this alias at it")
    sub.add_parser("log", help="list every lineage record, oldest first")
    rb = sub.add_parser("rollback", help="point an alias back at its previous holder (a `serve --follow` "
                                         "server swaps back between turns)")
    rb.add_argument("--alias", choices=["champion", "challenger"], default="champion")
    return p


def show(lin: Lineage, ref: str, as_json: bool) -> None:
    m = lin.pair(ref)
    recs = lin.records(m.id)
    aliases = [a for a in ("champion", "challenger") if lin.alias(a) == m.id]
    if as_json:
        print(json.dumps({"pair": m.to_dict(), "aliases": aliases, "records": recs}, indent=2, sort_keys=True))
        return
    print(f"pair      {m.id}" + (f"  ({', '.join(aliases)})" if aliases else ""))
    print(f"base      {m.base_fingerprint[:16]}  {m.base or '(default base)'}")
    for role, a in m.adapters.items():
        print(f"adapter   {role:<8} {a['id'][:16]}  {a['path']}")
    print(f"harness   {m.harness['id'][:16]}  {m.harness['path']}")
    for d in m.data:
        print(f"data      {d}")
    for r in recs:
        side = "child of " + (r["parent_id"] or "-")[:12] if r["pair_id"] == m.id else "parent of " + r["pair_id"][:12]
        print(f"record #{r['seq']}  gen {r['generation']}  {side}  {r['decision']}  "
              f"changes={json.dumps(r['changes'])}  reasons={json.dumps(r['reasons'])}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    path = args.lineage or default_lineage()
    try:
        with Lineage(path) as lin:
            if args.cmd == "show":
                show(lin, args.ref, args.json)
            elif args.cmd == "diff":
                a, b = lin.pair(args.a), lin.pair(args.b)
                lines = diff(a, b)
                print(f"{a.id[:12]} -> {b.id[:12]}")
                print("\n".join(lines) if lines else "same pair")
            elif args.cmd == "register":
                ads = {}
                for item in args.adapter:
                    role, sep, d = item.partition("=")
                    if not sep:
                        print(f"macaronic pair: --adapter wants ROLE=DIR, got {item!r}", file=sys.stderr)
                        return 2
                    ads[role] = d
                from macaronic.harness import DEFAULT_BUNDLE

                m = PairManifest.build(args.base, ads, args.harness or DEFAULT_BUNDLE)
                lin.add_pair(m)
                if args.alias:
                    lin.move_alias(args.alias, m.id, "registered by hand")
                print(m.id)
            elif args.cmd == "rollback":
                old, new = lin.rollback(args.alias)
                print(f"{args.alias}: {old[:16]} -> {new[:16]}")
            elif args.cmd == "log":
                for r in lin.records():
                    print(f"#{r['seq']} gen {r['generation']} {r['pair_id'][:12]} <- {(r['parent_id'] or '-')[:12]} "
                          f"{r['decision']} {json.dumps(r['changes'])}")
    except LineageError as e:
        print(f"macaronic pair: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
