"""What the external-suite probes share: the served MoL they answer through (a registered base or
given adapter directories, the router `macaronic serve` builds), and the JSON + table they write.

    llm, mol = served(base, adapter_dirs, constrain=True)
    write(out, path)   # out: {"models": [...], "categories": {name: {"n", "rows": {model: [...]}}}}
"""

from __future__ import annotations

import json
from pathlib import Path


def served(base: str | None, adapter_dirs: list, **harness):
    """(llm, MoL) as `macaronic serve` would build them for this base; the caller closes the llm."""
    from macaronic.engine.llm import EngineConfig, load_base_llm
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for
    from macaronic.serve.mol import HarnessConfig, MoL

    llm = load_base_llm(base, adapter_dirs, EngineConfig.from_env(max_batch=16))
    # the router serve builds: without one, "macaronic" would take the default route
    return llm, MoL.from_llm(llm, router=router_for(llm, load_bundle()), config=HarnessConfig(summaries=False, **harness))


def table(out: dict) -> str:
    """Markdown: per category, each row's score and its paired difference from base."""
    from macaronic.contract.stats import paired_bootstrap

    cats = list(out["categories"])
    lines = ["| model | " + " | ".join(f"{c} (n={out['categories'][c]['n']})" for c in cats) + " |",
             "|---|" + "---|" * len(cats)]
    for m in out["models"]:
        cells = []
        for c in cats:
            rows = out["categories"][c]["rows"]
            s = [r["passed"] for r in rows[m]]
            cell = f"{sum(s) / len(s):.3f}"
            if m != "base" and "base" in rows:
                d, ci = paired_bootstrap(s, [r["passed"] for r in rows["base"]])
                cell += f" ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"
            cells.append(cell)
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scores(rows: dict, n: int) -> dict:
    return {m: round(sum(r["passed"] for r in rs) / n, 3) for m, rs in rows.items()}


def write(out: dict, path: Path) -> None:
    """The rows as JSON at `path`, the table on stdout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out) + "\n")
    print(table(out))
