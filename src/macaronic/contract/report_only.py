"""A contract's report-only suites (HumanEval, BFCL
simple) beyond the first N that the contract fixes, under the ablation's configurations
(`macaronic eval report-only`, commands/eval_report_only.py).

The contract reports HumanEval on its first 20 problems and BFCL simple on its first 30; these
problems are public, so a larger slice changes no sealed split and no gate. This runs every
report-only suite of the contract with `--limit SUITE=N` (all 164 HumanEval problems by default)
on one pair, under the same configurations as `macaronic eval ablate` (`base`: the role prompt on
the bare base; a role's name: that adapter forced; `routed`: the pair's router picks), with the
suite's own grader, caps and seeds (HumanEval runs in the coding suite's sandbox). Rows are the
ablation's rows (resumable JSONL, keyed by configuration and pair); the summary gives each
configuration's score and its paired difference vs `base`; two bases' summaries pair up in
`macaronic eval table bases --key NAME`. Outside the contract: the rows carry the contract's sha256 for
their graders and caps, and the JSON names the limits used.
"""

from __future__ import annotations

from dataclasses import replace


def widen(contract, limits: dict[str, int | None], caps: dict[str, int] | None = None):
    """The contract with only its report-only suites, each at `limits[name]` tasks (None: all) and
    `caps[name]` tokens per reply (default: the contract's cap)."""
    caps = caps or {}
    bad = (set(limits) | set(caps)) - {s.name for s in contract.suites if s.report_only}
    if bad:
        raise ValueError(f"not report-only suites of {contract.id}: {sorted(bad)}")
    suites = tuple(replace(s, limit=limits.get(s.name, s.limit), max_tokens=caps.get(s.name, s.max_tokens))
                   for s in contract.suites if s.report_only)
    return replace(contract, suites=suites, primary=())


def summarize(contract, rows: list[dict], names: list[str]) -> dict:
    """{config: {suite: {"n", "score", "delta", "ci95"}}}: delta is vs base, paired over shared tasks."""
    from macaronic.contract.report import task_scores
    from macaronic.contract.stats import paired_bootstrap

    g = contract.gate
    ts = {n: task_scores(contract, [r for r in rows if r["config"] == n]) for n in names}
    out: dict = {}
    for n in names:
        out[n] = {}
        for s in contract.suites:
            keys = sorted(k for k, v in ts[n].items() if v["suite"] == s.name)
            if not keys:
                continue
            block = {"n": len(keys), "score": sum(ts[n][k]["score"] for k in keys) / len(keys)}
            shared = [k for k in keys if k in ts.get("base", {})]
            if n != "base" and shared:
                d, ci = paired_bootstrap([ts[n][k]["score"] for k in shared], [ts["base"][k]["score"] for k in shared],
                                         g.resamples, g.confidence, g.seed)
                block.update({"delta": d, "ci95": ci, "n_paired": len(shared)})
            out[n][s.name] = block
    return out


def parse_limits(text: str) -> dict[str, int | None]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, n = part.partition("=")
        if not n or not (n == "all" or n.isdigit()):
            raise ValueError(f"--limit wants SUITE=N or SUITE=all, got {part!r}")
        out[name.strip()] = None if n == "all" else int(n)
    return out
