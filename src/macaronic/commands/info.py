"""`macaronic info`: describe the registered bases, the base and the registered adapters."""

from __future__ import annotations

import argparse
import json

from macaronic.engine.bases import BASE_HELP


def bases_table() -> list[dict]:
    """Every registered base: its packages, pin, whether its packages are installed and whether its
    import is cached (no model is loaded)."""
    from macaronic.engine import bases
    from macaronic.engine.base import home

    rows = []
    for b in bases.BASES.values():
        d = bases.specialists_dir(b)
        rows.append({"name": b.name, "default": b.name == bases.DEFAULT_BASE, "upstream": b.hf_id,
                     "packages": b.pins(), "sha256": b.sha256, "installed": bases.installed(b),
                     "imported": (home() / "bases" / b.name / "config.json").is_file(),
                     "specialists": sorted(p.name for p in d.iterdir() if (p / "adapter_config.json").is_file())
                     if d.is_dir() else [],
                     "licence": str(bases.licence_path(b)), "served": _precision_name(*b.served)})
    return rows


def _precision_name(dtype: str, quant: str) -> str:
    name = {"float32": "fp32", "bfloat16": "bf16"}.get(dtype, dtype)
    return name if quant == "none" else f"{name} + {quant}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="macaronic info", description="Describe the base model and its adapters.")
    ap.add_argument("--base", help=BASE_HELP)
    ap.add_argument("--adapter", action="append", default=[], metavar="DIR",
                    help="register this PEFT adapter directory (repeatable); default: the base's shipped specialists")
    ap.add_argument("--bases", action="store_true", help="only list the registered bases (loads no model)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    a = ap.parse_args(argv)
    table = bases_table()
    if a.bases:
        if a.json:
            print(json.dumps(table, indent=2))
            return 0
        for r in table:
            state = "installed" if r["installed"] else f"not installed (scripts/setup --base {r['name']})"
            print(f"{r['name']:<24}{' (default)' if r['default'] else '':<11}{state}; "
                  f"specialists: {','.join(r['specialists']) or 'none'}; serves {r['served']}")
            pkgs = r["packages"]
            via = pkgs[0] if len(pkgs) == 1 else f"{pkgs[0]} ... {pkgs[-1]} ({len(pkgs)} parts)"
            print(f"{'':<35}{r['upstream']} via {via}")
        return 0
    from macaronic.engine.llm import load_base_llm

    llm = load_base_llm(a.base, a.adapter)
    d = {**llm.describe(), "bases": table}
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
    for r in table:
        print(f"bases    {r['name']:<24}{'installed' if r['installed'] else 'not installed'}"
              f"{', default' if r['default'] else ''}")
    return 0
