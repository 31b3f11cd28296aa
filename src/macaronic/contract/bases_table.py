"""The two-base ablation table: what the base gives and what the adapter scheme gives, per suite.

Reads two `macaronic eval ablate` summaries (one per base, same contract; each names its per-task
JSONL; or two `macaronic eval report-only` summaries) and pairs their rows over the same sealed tasks: base B alone vs base A alone (what the
bigger base gives), routed MoL vs the same base alone on each base (what the adapter scheme gives),
and routed B vs routed A, each with its 95% paired-bootstrap interval (the contract's gate
settings). Pure: `macaronic eval table bases` (commands/eval_table.py) reads the files and writes
the markdown section.

    macaronic eval table bases --contract contracts/macaronic-core-v4.yaml \\
        --ablation docs/bench/bases-smollm2.json --ablation docs/bench/bases-qwen.json --md docs/BENCHMARKS.md
"""

from __future__ import annotations


START, END = "<!-- bases-ablation:start -->", "<!-- bases-ablation:end -->"


def config_scores(contract, doc: dict, rows: list[dict]) -> dict[str, dict[str, dict]]:
    """config -> task key -> task_scores entry, for the rows of this summary's pair."""
    from macaronic.contract.report import task_scores

    out = {}
    for cfg, pid in doc["pair_ids"].items():
        ran = set(doc.get("configs", {}).get(cfg, {})) or None  # the suites this summary covered
        rs = [r for r in rows if r.get("config") == cfg and r["pair"] == f"{cfg}/{pid}"
              and (ran is None or r["suite"] in ran)]
        if rs:
            out[cfg] = task_scores(contract, rs)
    return out


POOLED = "primary (pooled)"


def _in(contract, suite: str):
    """The suite names a table row covers: one suite, or every primary suite for the pooled row
    (the contract's primary metric pools their task scores)."""
    return set(contract.primary) if suite == POOLED else {suite}


def compare(contract, a: dict, b: dict, suite: str) -> dict | None:
    """Paired difference b - a over the tasks both scored on `suite` (or on every primary suite)."""
    from macaronic.contract.stats import paired_bootstrap

    names = _in(contract, suite)
    keys = sorted(k for k in a if a[k]["suite"] in names and k in b)
    if not keys:
        return None
    g = contract.gate
    d, ci = paired_bootstrap([b[k]["score"] for k in keys], [a[k]["score"] for k in keys], g.resamples,
                             g.confidence, g.seed)
    return {"n": len(keys), "delta": d, "ci95": ci}


def table(contract, names: tuple[str, str], scores: tuple[dict, dict]) -> dict:
    """{suite: {"n", "<name> <config>": score, "base_gain", "scheme_gain_<name>", "routed_gain"}}."""
    (na, nb), (sa, sb) = names, scores
    out = {}
    ran = {v["suite"] for sc in (sa, sb) for by in sc.values() for v in by.values()}
    pooled = [POOLED] if len(ran & set(contract.primary)) > 1 else []
    for s in [x.name for x in contract.suites] + pooled:
        row: dict = {}
        for n, sc in ((na, sa), (nb, sb)):
            for cfg in ("base", "routed", "oracle"):
                vals = [v["score"] for v in sc.get(cfg, {}).values() if v["suite"] in _in(contract, s)]
                if vals:
                    row[f"{n} {cfg}"] = sum(vals) / len(vals)
                    row.setdefault("n", len(vals))
        if not row:
            continue
        row["base_gain"] = compare(contract, sa.get("base", {}), sb.get("base", {}), s)
        for n, sc in ((na, sa), (nb, sb)):
            row[f"scheme_gain {n}"] = compare(contract, sc.get("base", {}), sc.get("routed", {}), s)
        row["routed_gain"] = compare(contract, sa.get("routed", {}), sb.get("routed", {}), s)
        out[s] = row
    return out


def _d(v: dict | None) -> str:
    if not v or v.get("delta") is None:
        return "-"
    lo, hi = v["ci95"]
    return f"{v['delta']:+.3f} [{lo:+.3f}, {hi:+.3f}] (n={v['n']})"


def markdown(contract, names: tuple[str, str], t: dict, commands: list[str]) -> str:
    na, nb = names
    primary = set(contract.primary)
    lines = ["Commands (one per base, same contract, per-task rows paired over the same sealed tasks):", ""]
    lines += [f"- `{c}`" for c in commands]
    lines += ["", f"| suite | {na} base | {na} routed | {nb} base | {nb} routed | from the base: {nb} base − {na} base "
              f"| from the scheme on {na}: routed − base | from the scheme on {nb}: routed − base | "
              f"routed {nb} − routed {na} |", "|---|---:|---:|---:|---:|---|---|---|---|"]
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for s, r in t.items():
        label = s if s in primary else f"**{s}**" if s == POOLED else f"{s} (report-only)"
        lines.append(f"| {label} | {f(r.get(f'{na} base'))} | {f(r.get(f'{na} routed'))} | {f(r.get(f'{nb} base'))} | "
                     f"{f(r.get(f'{nb} routed'))} | {_d(r['base_gain'])} | {_d(r[f'scheme_gain {na}'])} | "
                     f"{_d(r[f'scheme_gain {nb}'])} | {_d(r['routed_gain'])} |")
    oracle = [(s, r) for s, r in t.items() if f"{na} oracle" in r or f"{nb} oracle" in r]
    if oracle:
        lines += ["", "Oracle routing (each turn to its gold role): " + "; ".join(
            f"{s} {na} {f(r.get(f'{na} oracle'))}, {nb} {f(r.get(f'{nb} oracle'))}" for s, r in oracle) + "."]
    lines += ["", "Cells: mean task score; differences with their 95% paired-bootstrap interval over the tasks "
              "both rows scored. A dash: that row was not run for the suite."]
    if POOLED in t:
        lines[-1] += (f" {POOLED}: the task scores of every primary suite pooled, as the contract's primary "
                      "metric pools them (each row's mean over the tasks it scored).")
    return "\n".join(lines) + "\n"
