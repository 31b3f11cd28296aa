"""The transfer and compounding report: per generation, what the search tried on dev, what the
sealed gate said, and the gains against the parent and against generation 0, per suite and per
stratum (easy / mid / hard from the k-sample reference), with paired-bootstrap intervals; the
sealed-test read count. Markdown and a PNG, from the workdir's files (pure reads; the CLI writes).
"""

from __future__ import annotations

import json
from pathlib import Path

from macaronic.contract.report import STRATA, task_scores
from macaronic.contract.stats import paired_bootstrap


def _rows(ev: Path, sha: str, pair: str) -> list[dict]:
    """A pair's rows in the decision `ev` (eval.json): its committed rows file, else the live task log."""
    from macaronic.contract.decision_rows import read_rows as read_gz, rows_path
    from macaronic.contract.evaluate import read_rows

    rows = read_gz(rows_path(ev), sha) if rows_path(ev).is_file() else read_rows(ev.with_name(ev.name + ".tasks.jsonl"), sha)
    return [r for r in rows if r["pair"] == pair]


def _delta(contract, child: dict, ref: dict, keys: list[str], salt: int) -> dict:
    both = [k for k in keys if k in child and k in ref]
    g = contract.gate
    d, ci = paired_bootstrap([child[k]["score"] for k in both], [ref[k]["score"] for k in both],
                             g.resamples, g.confidence, g.seed + salt)
    return {"n": len(both), "delta": d, "ci95": ci}


def transfer(contract, workdir: Path, summary: dict) -> dict:
    """{"rows": per gated generation: vs parent and vs gen 0, per suite and stratum}."""
    workdir = Path(workdir)
    strata_doc = json.loads((workdir / "strata.json").read_text()) if (workdir / "strata.json").exists() else {}
    strata = strata_doc.get("tasks", {})
    g0 = [g for g in summary["generations"] if g["generation"] == 0]
    out = []
    if not g0:
        return {"rows": out, "strata": strata_doc.get("k")}
    ref = task_scores(contract, _rows(workdir / "gen-000" / "eval.json", contract.sha256, g0[0]["pair_id"]))
    for g in summary["generations"]:
        if g["generation"] == 0 or g["decision"] in ("kept", "in progress"):
            continue
        d = workdir / f"gen-{g['generation']:03d}"
        child = task_scores(contract, _rows(d / "eval.json", contract.sha256, g["pair_id"]))
        row = {"generation": g["generation"], "pair_id": g["pair_id"], "decision": g["decision"],
               "vs_parent": {s: {"delta": v.get("delta"), "ci95": v.get("delta_ci95"), "n": v.get("n")}
                             for s, v in g["suites"].items()},
               "vs_parent_strata": {k: {"delta": v.get("delta"), "ci95": v.get("delta_ci95"), "n": v.get("n")}
                                    for k, v in g["strata"].items()},
               "vs_gen0": {}, "vs_gen0_strata": {}}
        for i, s in enumerate(contract.suites):
            keys = sorted(k for k in child if child[k]["suite"] == s.name)
            row["vs_gen0"][s.name] = _delta(contract, child, ref, keys, i)
        prim = sorted(k for k in child if child[k]["suite"] in contract.primary)
        row["vs_gen0"]["primary"] = _delta(contract, child, ref, prim, 999)
        for j, st in enumerate(STRATA):
            row["vs_gen0_strata"][st] = _delta(contract, child, ref, sorted(k for k, v in strata.items() if v == st),
                                               100 + j)
        out.append(row)
    return {"rows": out, "strata": strata_doc.get("k")}


def _d(b: dict | None) -> str:
    if not b or b.get("delta") is None:
        return "-"
    ci = b.get("ci95")
    return f"{b['delta']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "") + (f" n={b['n']}" if b.get("n") else "")


def _by_purpose(by: dict) -> str:
    """Older reports counted gate and reference reads together as `evaluator`."""
    if "gate" not in by:
        return f"{by.get('evaluator', 0)} gate/reference, {by.get('strata', 0)} strata"
    other = by.get("evaluator", 0)
    return (f"{by['gate']} gate, {by.get('reference', 0)} reference, {by.get('strata', 0)} strata"
            + (f", {other} OTHER (not the gate's)" if other else ""))


def markdown(summary: dict, tr: dict) -> str:
    c, sr = summary["contract"], summary.get("sealed_reads", {})
    st = summary.get("strata")
    out = [f"Contract `{c['id']}` (sha256 `{c['sha256'][:16]}...`); champion `{(summary.get('champion') or '-')[:12]}`.",
           "",
           f"Sealed test reads: {sr.get('evaluations', 0)} evaluations ({_by_purpose(sr.get('by_purpose', {}))}), "
           f"{sr.get('suite_reads', 0)} suite reads, {sr.get('refused', 0)} refused attempts by the trainer/collector. "
           "Across every run of this contract version: `macaronic contract check`.",
           ""]
    if st:
        out += [f"Strata: frozen from `{st['reference'][:12]}` with k={st['k']} samples per test task at "
                f"T={st['temperature']}: {st['counts']}.", ""]
    out += ["## The search, per generation (dev screening)", "",
            "| gen | candidate | operator | components | verdict | pooled dev Δ [interval] | note |",
            "|---|---|---|---|---|---|---|"]
    for g in summary["generations"]:
        for sc in g.get("screens", []):
            p = sc["pooled"]
            ci = p.get("ci")
            out.append(f"| {g['generation']} | {sc['name']} `{sc['pair_id'][:8]}` | {sc['operator']} | "
                       f"{', '.join(sc['components'])} | {sc['verdict']} | "
                       + ("-" if p.get("delta") is None else f"{p['delta']:+.3f}"
                          + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "") + f" n={p['n']}")
                       + f" | {sc.get('note', '')} |")
    out += ["", "## Sealed gate, per generation", "", "| gen | pair | decision | failed rules | what changed |",
            "|---|---|---|---|---|"]
    for g in summary["generations"]:
        what = "; ".join(_change(ch) for ch in g["changes"]) or ("(reference)" if g["generation"] == 0 else "-")
        if g["decision"] == "kept":
            what = "no dev-positive candidate: sealed test not read"
        elif g["decision"] == "in progress":
            what = "cut short: screening unfinished, no decision"
        out.append(f"| {g['generation']} | `{g['pair_id'][:10]}` | {g['decision']} | {', '.join(g['failed_rules']) or '-'} | {what} |")
    rows = tr["rows"]
    if rows:
        suites = [k for k in rows[0]["vs_gen0"]]
        out += ["", "## Gains against the parent and against generation 0 (sealed test, 95% paired bootstrap)", "",
                "| gen | against | " + " | ".join(suites) + " |", "|---|---|" + "---|" * len(suites)]
        for r in rows:
            out.append(f"| {r['generation']} | parent | " + " | ".join(_d(r["vs_parent"].get(s)) for s in suites) + " |")
            out.append(f"| {r['generation']} | gen 0 | " + " | ".join(_d(r["vs_gen0"].get(s)) for s in suites) + " |")
        out += ["", "## Transfer by stratum (easy / mid / hard from the k-sample reference)", "",
                "| gen | against | easy | mid | hard |", "|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {r['generation']} | parent | " + " | ".join(_d(r["vs_parent_strata"].get(s)) for s in STRATA) + " |")
            out.append(f"| {r['generation']} | gen 0 | " + " | ".join(_d(r["vs_gen0_strata"].get(s)) for s in STRATA) + " |")
    else:
        out += ["", "No generation reached the sealed gate, so there is no test-split gain to report."]
    a = summary.get("archive", {})
    out += ["", f"Archive: {a.get('members', 0)} pairs, {len(a.get('front', []))} on the per-suite Pareto front, "
                f"{len(a.get('dominated', []))} dominated (kept; they can parent); verdicts {a.get('by_verdict', {})}."]
    return "\n".join(out) + "\n"


def _change(ch: dict) -> str:
    own = _own_change(ch)
    return f"{own} (inherited from `{ch['inherited_from'][:8]}`)" if ch.get("inherited_from") else own


def _own_change(ch: dict) -> str:
    step = ch.get("step", "?")
    if step == "router_refit":
        return f"router refit ({ch.get('train_examples')} turns, policy {ch.get('policy')})"
    if step == "rft":
        return f"rft {ch['role']}: {ch['successes']} successes" + (f", {ch.get('train_steps')} steps" if ch.get("retrained") else " (not retrained)")
    if step == "harness_edit":
        return f"{ch.get('file')}: {ch.get('note', '')}"
    if step == "failure_data":
        return f"failure_data {ch.get('role')}: {ch.get('skill')}, {ch.get('train_steps')} steps"
    if step == "grpo":
        return f"{step} {ch.get('role')}: {ch.get('train_steps')} steps"
    return step


def plot(summary: dict, tr: dict, out: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.5))
    # dev screening: each candidate's pooled dev delta, coloured by verdict
    colours = {"positive": "tab:green", "neutral": "tab:gray", "harmful": "tab:red"}
    for g in summary["generations"]:
        for i, sc in enumerate(g.get("screens", [])):
            p = sc["pooled"]
            if p.get("delta") is None:
                continue
            ci = p.get("ci") or [p["delta"], p["delta"]]
            x = g["generation"] + (i - 2) * 0.08
            a1.errorbar([x], [p["delta"]], yerr=[[p["delta"] - ci[0]], [ci[1] - p["delta"]]], marker="o",
                        color=colours.get(sc["verdict"], "k"), capsize=2)
    a1.axhline(0, color="k", lw=0.5)
    a1.set_xlabel("generation")
    a1.set_ylabel("pooled dev Δ vs champion")
    a1.set_title("search: candidates screened on dev\n(green positive, grey neutral, red harmful)")
    rows = tr["rows"]
    for ax, key, names in ((a2, "vs_gen0", None), (a3, "vs_gen0_strata", list(STRATA))):
        names = names or (list(rows[0][key]) if rows else [])
        for j, n in enumerate(names):
            xs, ys, lo, hi = [], [], [], []
            for r in rows:
                b = r[key].get(n) or {}
                if b.get("delta") is None:
                    continue
                ci = b.get("ci95") or [b["delta"], b["delta"]]
                xs.append(r["generation"] + (j - len(names) / 2) * 0.06)
                ys.append(b["delta"])
                lo.append(b["delta"] - ci[0])
                hi.append(ci[1] - b["delta"])
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=n)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xlabel("generation (gated candidates only)")
        ax.set_ylabel("Δ vs generation 0 on the sealed test (95% CI)")
        if names and rows:
            ax.legend(fontsize=8)
    last = max([1] + [g["generation"] for g in summary["generations"]])
    for ax in (a1, a2, a3):  # whole generations on every axis, the run's span even when one was gated
        ax.set_xlim(0.5, last + 0.5)
        ax.set_xticks(range(1, last + 1))
    a2.set_title("compounding: per suite")
    a3.set_title("transfer: per stratum (k-sample reference)")
    if not rows:
        for ax in (a2, a3):
            ax.text(0.5, 0.5, "no generation reached the sealed gate", ha="center", va="center", transform=ax.transAxes)
    sr = summary.get("sealed_reads", {})
    fig.suptitle(f"{summary['contract']['id']}: sealed test read {sr.get('evaluations', 0)} times")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
