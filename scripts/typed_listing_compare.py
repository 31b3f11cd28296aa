"""The typed tool listing (docs/LOG.md, 2026-12-05 fourth session, issue 36): the same BFCL items
(irrelevance first 40; simple / multiple / parallel / parallel_multiple first 20 each, and the next
20 for the listing comparison) with the shipped agent served under the compact listing (the shipped
bundle's) and the typed one, the agent retrained under the typed listing, the bare base, and the
routed MoL, all on one 2-core AVX2 EPYC, fp32, greedy. Paired bootstrap over items
(`contract.stats.paired_bootstrap`). The typed rows ran under the shipped bundle's files with
`"tool_listing": "typed"` and `"version": "0.2.0"` in bundle.json (harness id d91a3963…, recorded in
the rows made after `probe bfcl` learned to record it); the compact next-20 batch under the same with
`"compact"` (f36846af…: the shipped bundle but for the version string).
Rows (docs/bench/external/):

    bfcl-qwen-agent-functions-cand-{4x20,irr}.json   the shipped agent, compact listing (third session)
    bfcl-qwen-typed-ship-{4x20,irr}.json             the same adapter, typed listing
    bfcl-qwen-typed-cand-{4x20,irr}.json             retrained under the typed listing
    bfcl-qwen-typed-base-{4x20,irr}.json             the bare base, typed listing; irr also the routed MoL
    bfcl-qwen-{typed,compact}-ship-4x20b.json        the shipped agent, the next 20 (--offset 20 --limit 20)

each from (bundle.json's "tool_listing" as the row says):

    MACARONIC_QUANT=none MACARONIC_DTYPE=float32 OMP_NUM_THREADS=2 macaronic probe bfcl \\
      --base qwen2.5-coder-0.5b --categories simple,multiple,parallel,parallel_multiple --limit 20 \\
      --models agent [--adapter-dir runs/typed/out] --json F            # *-4x20 (base: --models base)
    ... --categories irrelevance --limit 40 --models agent ...           # *-irr (base: --models base,macaronic)
    ... --offset 20 --limit 20 --models agent ...                        # *-4x20b (first four categories)

    .venv/bin/python scripts/typed_listing_compare.py
"""

from __future__ import annotations

import json

from macaronic.contract.stats import paired_bootstrap

EXT = "docs/bench/external/"
CATS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
ROWS = {  # name -> (file prefix, model)
    "base": (EXT + "bfcl-qwen-typed-base-", "base"),
    "compact": (EXT + "bfcl-qwen-agent-functions-cand-", "agent"),
    "typed": (EXT + "bfcl-qwen-typed-ship-", "agent"),
    "retrained": (EXT + "bfcl-qwen-typed-cand-", "agent"),
}


def rows(path: str, cat: str, model: str = "agent") -> dict[str, float]:
    """Problem id -> passed, for one model's rows of one category of a `probe bfcl` JSON."""
    return {r["id"]: float(r["passed"]) for r in json.load(open(path))["categories"][cat]["rows"][model]}


def passed(name: str, cat: str) -> dict[str, float]:
    prefix, model = ROWS[name]
    return rows(prefix + ("irr" if cat == "irrelevance" else "4x20") + ".json", cat, model)


def cell(new: list[float], old: list[float] | None = None) -> str:
    if old is None:
        return f"{sum(new) / len(new):.3f}"
    d, ci = paired_bootstrap(new, old)
    return f"{sum(new) / len(new):.3f} ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"


def main() -> None:
    pairs = [("bare base, typed", "base", None), ("shipped agent, compact", "compact", None),
             ("shipped agent, typed (− compact)", "typed", "compact"),
             ("shipped agent, typed (− base, typed)", "typed", "base"),
             ("retrained under typed (− shipped, typed)", "retrained", "typed")]
    print("| row | " + " | ".join(CATS) + " | the four call categories |\n|---|" + "---|" * (len(CATS) + 1))
    for label, new, old in pairs:
        cells, all_new, all_old = [], [], []
        for cat in CATS:
            n, o = passed(new, cat), passed(old, cat) if old else None
            ids = sorted(n)
            assert o is None or sorted(o) == ids, (new, old, cat)
            cells.append(cell([n[i] for i in ids], [o[i] for i in ids] if o else None))
            if cat != "irrelevance":
                all_new += [n[i] for i in ids]
                all_old += [o[i] for i in ids] if o else []
        cells.append(cell(all_new, all_old or None))
        print(f"| {label} | " + " | ".join(cells) + " |")
    # the next 20 of each call category (--offset 20 --limit 20), the shipped agent under each listing
    both = {"typed": EXT + "bfcl-qwen-typed-ship-4x20b.json", "compact": EXT + "bfcl-qwen-compact-ship-4x20b.json"}
    print("\nthe shipped agent, typed − compact, problems 1-40 of each call category (the first 20 above and the next 20):")
    all_t, all_c = [], []
    for cat in CATS[:-1]:
        t = {**passed("typed", cat), **rows(both["typed"], cat)}
        c = {**passed("compact", cat), **rows(both["compact"], cat)}
        ids = sorted(t)
        assert sorted(c) == ids and len(ids) == 40
        all_t += [t[i] for i in ids]
        all_c += [c[i] for i in ids]
        print(f"  {cat}: compact {cell([c[i] for i in ids])}, typed {cell([t[i] for i in ids], [c[i] for i in ids])}")
    print(f"  the four together (160): compact {cell(all_c)}, typed {cell(all_t, all_c)}")
    routed = json.load(open(EXT + "bfcl-qwen-typed-base-irr.json"))["categories"]["irrelevance"]["rows"]
    if "macaronic" in routed:
        r = rows(EXT + "bfcl-qwen-typed-base-irr.json", "irrelevance", "macaronic")
        b = passed("base", "irrelevance")
        ids = sorted(r)
        print(f"\nrouted MoL, irrelevance (40): {cell([r[i] for i in ids], [b[i] for i in ids])} against the bare base; "
              f"{sum(x.get('policy') == 'tools' for x in routed['macaronic'])} turns to the agent by the tools rule")


if __name__ == "__main__":
    main()
