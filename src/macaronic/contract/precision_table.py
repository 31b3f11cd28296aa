"""The served precision by the contract: the routed MoL at each precision against fp32, per suite.

Reads `macaronic eval ablate --configs routed` summaries, one per precision (`--dtype/--quant`;
the first is the reference, fp32), pairs their per-task rows over the same sealed tasks and gives
each suite's score with the difference from the reference and its 95% paired-bootstrap interval
(the contract's gate settings). The rule (README): the served default is the fastest precision
whose routed score on every primary suite is not below the reference's 95% interval (a score
above it loses nothing), speed being
the aggregate tokens/s of `macaronic bench --only precision` (32 concurrent streams through the
HTTP server, one server per precision) given by --speed. Pure: `macaronic eval table precision` (commands/eval_table.py) reads and writes.

    macaronic eval table precision --contract contracts/macaronic-core-v4.yaml \\
        --ablation docs/bench/precision-fp32.json --ablation docs/bench/precision-int4.json \\
        --speed docs/bench/serve-precision.json --json docs/bench/precision-table.json --md docs/BENCHMARKS.md
"""

from __future__ import annotations


def name_of(doc: dict) -> str:
    dtype, quant = doc.get("dtype", "float32"), doc.get("quant", "none")
    if quant != "none":
        return quant
    return {"float32": "fp32", "bfloat16": "bf16"}.get(dtype, dtype)


def table(contract, docs: list[dict], scores: list[dict], speed: dict[str, float] | None) -> dict:
    """{"rows": {precision: {suite: {score, delta, ci95, n, not_below}}}, "eligible", "default"}."""
    from macaronic.contract.bases_table import compare

    from macaronic.contract.stats import bootstrap_ci

    ref_doc, ref = docs[0], scores[0].get("routed", {})
    g = contract.gate
    ref_ci = {s: bootstrap_ci([v["score"] for v in ref.values() if v["suite"] == s], g.resamples, g.confidence, g.seed)
              for s in contract.primary}
    rows: dict = {}
    for doc, sc in zip(docs, scores):
        name, routed = name_of(doc), sc.get("routed", {})
        row = {}
        for s in contract.primary:
            vals = [v["score"] for v in routed.values() if v["suite"] == s]
            if not vals:
                continue
            score = sum(vals) / len(vals)
            c = compare(contract, ref, routed, s) if doc is not ref_doc else None
            lo = (ref_ci.get(s) or (None, None))[0]
            row[s] = {"score": round(score, 4), "n": len(vals),
                      "not_below": lo is not None and score >= lo - 1e-9,  # not below the reference's interval
                      **({"delta": round(c["delta"], 4), "ci95": [round(x, 4) for x in c["ci95"]]} if c else {})}
        rows[name] = row
    eligible = [n for n, row in rows.items() if len(row) == len(contract.primary) and all(v["not_below"] for v in row.values())]
    ranked = sorted(eligible, key=lambda n: -(speed or {}).get(n, 0.0))
    return {"reference": name_of(ref_doc), "rows": rows, "eligible": eligible, "speed": speed or {},
            "default": ranked[0] if ranked and speed and all(n in speed for n in eligible) else None}


def markdown(t: dict, contract, commands: list[str], speed_command: str | None) -> str:
    names = list(t["rows"])
    out = ["Commands:", "", *[f"- `{c}`" for c in commands]]
    if speed_command:
        out.append(f"- speed: `{speed_command}`")
    out += ["", "| suite | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for s in contract.primary:
        cells = []
        for n in names:
            v = t["rows"][n].get(s)
            if v is None:
                cells.append("-")
            elif "delta" in v:
                cells.append(f"{v['score']:.3f} ({v['delta']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}], n={v['n']})"
                             f"{'' if v['not_below'] else ' below'}")
            else:
                cells.append(f"{v['score']:.3f} (n={v['n']})")
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    if t["speed"]:
        out.append("| served tok/s (32 streams) | " + " | ".join(str(t["speed"].get(n, "-")) for n in names) + " |")
    out += ["", f"Cells: the routed MoL's mean task score; in brackets the difference from {t['reference']} with its "
            "95% paired-bootstrap interval over the same sealed tasks. \"below\": the score lies below the "
            f"{t['reference']} score's own 95% interval.", "",
            f"Eligible by the rule (no primary suite below {t['reference']}'s 95% interval): "
            f"{', '.join(t['eligible']) or 'none'}; served default (the fastest eligible): **{t['default'] or 'not decided'}**.",
            ""]
    return "\n".join(out)


def speed_of(bench: dict) -> dict[str, dict]:
    """precision -> its row of `macaronic bench --only precision` (32 streams through the server)."""
    return {v["label"]: v for v in (bench.get("serve_precision") or {}).get("variants", [])
            if "tok_s" in v and v["label"] in ("fp32", "bf16", "int8", "int4")}
