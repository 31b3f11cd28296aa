"""`macaronic train check`: trained specialists against the bare base on held-out (dev-family)
prompts, through the engine (train/check.py); never reads test families."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from macaronic.train.check import __doc__ as CHECK_DOC


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic train check", description=CHECK_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--roles", default="chat,agent,coding,genui")
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--adapters", type=Path, default=None, help="directory of <role>/ adapters (default: shipped)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--base", default=None, help="a registered base (default: the default base)")
    a = p.parse_args(argv)
    from macaronic.engine.llm import load_default_llm, load_llm
    from macaronic.train.check import check

    roles = a.roles.split(",")
    llm = load_llm(a.base, [a.adapters / r for r in roles]) if a.adapters else load_default_llm(base=a.base)
    try:
        res = check(llm, roles, a.n)
    finally:
        llm.close()
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))
    return 0
