"""The agent comparison of 2026-12-05 (docs/LOG.md, issue 36): the function-tool warm start against
the agent it replaced, both run on the same machine (a 2-core AVX2 EPYC, fp32, greedy), BFCL's
irrelevance (first 40) and simple / multiple / parallel / parallel_multiple (first 20 each), forced;
the routed MoL on irrelevance; the bare base's rows from the committed 40-per-category run
(`bfcl-qwen-engine-40.json`). Paired bootstrap over items (`contract.stats.paired_bootstrap`).
Rows (docs/bench/external/bfcl-qwen-agent-functions-*.json) came from:

    MACARONIC_QUANT=none MACARONIC_DTYPE=float32 OMP_NUM_THREADS=2 macaronic probe bfcl \\
      --base qwen2.5-coder-0.5b --categories irrelevance --limit 40 --models agent \\
      [--adapter-dir runs/agent-fn/out] --json F              # cand-irr / ship-irr
    ... --categories simple,multiple,parallel,parallel_multiple --limit 20 --models agent ...  # cand-4x20 / ship-4x20
    ... --categories irrelevance --limit 40 --models macaronic --adapter-dir runs/agent-fn/out  # cand-irr-routed
    ... --categories irrelevance --limit 40 --models base,macaronic --adapter-dir WARM3  # ship-irr-routed-base
    (WARM3: the replaced adapter's files, `git show 187306b:src/macaronic/specialists/qwen2.5-coder-0.5b/agent/F`)

    .venv/bin/python scripts/agent_functions_compare.py
"""

from __future__ import annotations

import json

from macaronic.contract.stats import paired_bootstrap

EXT = "docs/bench/external/"
PRE = EXT + "bfcl-qwen-agent-functions-"
CATS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")


def _rows(path: str, cat: str, model: str) -> list[dict]:
    return json.load(open(path))["categories"][cat]["rows"][model]


def _cell(new: list[float], old: list[float]) -> str:
    d, ci = paired_bootstrap(new, old)
    return f"{sum(new) / len(new):.3f} ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"


def main() -> None:
    print("| row | " + " | ".join(CATS) + " |\n|---|" + "---|" * len(CATS))
    table = {k: [] for k in ("base", "shipped", "new", "new_vs_base")}
    for cat in CATS:
        f = "irr" if cat == "irrelevance" else "4x20"
        new, old = _rows(f"{PRE}cand-{f}.json", cat, "agent"), _rows(f"{PRE}ship-{f}.json", cat, "agent")
        ids = [r["id"] for r in new]
        assert ids == [r["id"] for r in old]
        base = {r["id"]: float(r["passed"]) for r in _rows(EXT + "bfcl-qwen-engine-40.json", cat, "base")}
        b, n, o = [base[i] for i in ids], [float(r["passed"]) for r in new], [float(r["passed"]) for r in old]
        table["base"].append(f"{sum(b) / len(b):.3f}")
        table["shipped"].append(f"{sum(o) / len(o):.3f}")
        table["new"].append(_cell(n, o))
        table["new_vs_base"].append(_cell(n, b))
    names = {"base": "bare base (committed rows, n = 20 / 40)", "shipped": "agent of 2026-12-04 (warm3)",
             "new": "function-tool warm start (− warm3)", "new_vs_base": "function-tool warm start (− base)"}
    for k, cells in table.items():
        print(f"| {names[k]} | " + " | ".join(cells) + " |")
    routed = _rows(f"{PRE}cand-irr-routed.json", "irrelevance", "macaronic")
    here = f"{PRE}ship-irr-routed-base.json"  # the bare base and the replaced agent's MoL, the same box
    base = {r["id"]: float(r["passed"]) for r in _rows(here, "irrelevance", "base")}
    old = {r["id"]: float(r["passed"]) for r in _rows(here, "irrelevance", "macaronic")}
    r = [float(x["passed"]) for x in routed]
    b, o = [base[x["id"]] for x in routed], [old[x["id"]] for x in routed]
    to_agent = sum(x.get("policy") == "tools" for x in routed)
    print(f"\nirrelevance (40) on this box: bare base {sum(b) / len(b):.3f}; routed MoL {_cell(r, b)} against the base, "
          f"{_cell(r, o)} against the replaced agent's MoL; with the replaced agent {_cell(o, b)} against the base; "
          f"{to_agent} routed to the agent by the tools rule")

if __name__ == "__main__":
    main()
