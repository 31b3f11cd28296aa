"""The served precision by the contract: the routed MoL at each precision against fp32, per suite.

Reads `macaronic eval ablate --configs routed` summaries, one per precision (`--dtype/--quant`;
the first is the reference, fp32), pairs their per-task rows over the same sealed tasks and gives
each suite's score with the difference from the reference and its 95% paired-bootstrap interval
(the contract's gate settings). The rule (README): the served default is the fastest precision
whose routed score on every primary suite is not below the reference's 95% interval (a score
above it loses nothing), speed being
the aggregate tokens/s of `macaronic bench --only precision` (32 concurrent streams through the
HTTP server, one server per precision) given by --speed. Pure apart from `main`.

    python -m macaronic.contract.precision_table --contract contracts/macaronic-core-v4.yaml \\
        --ablation docs/bench/precision-fp32.json --ablation docs/bench/precision-int4.json \\
        --speed docs/bench/serve-precision.json --json docs/bench/precision-table.json --md docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path



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


def main(argv: list[str] | None = None) -> int:
    from macaronic.bench.docs import write_section
    from macaronic.contract.bases_table import config_scores
    from macaronic.contract.evaluate import read_rows
    from macaronic.contract.spec import load as load_contract

    p = argparse.ArgumentParser(prog="python -m macaronic.contract.precision_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path)
    p.add_argument("--ablation", action="append", required=True, type=Path,
                   help="an `eval ablate --configs routed` summary per precision; the first is the reference")
    p.add_argument("--speed", type=Path, default=None, help="a `macaronic bench --only precision` JSON")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--md", type=Path, default=None)
    p.add_argument("--key", default="precision",
                   help="the <!-- KEY:start/end --> markers of the section written (default precision)")
    p.add_argument("--title", default="The served precision by the contract", help="the section's heading")
    a = p.parse_args(argv)
    contract = load_contract(a.contract, hashes=False)
    docs = [json.loads(f.read_text()) for f in a.ablation]
    for f, d in zip(a.ablation, docs):
        if d["contract"]["sha256"] != contract.sha256:
            p.error(f"{f} was measured under another contract ({d['contract']['id']})")
        if d["pair_ids"].get("routed") != docs[0]["pair_ids"].get("routed"):
            p.error(f"{f} answered with another pair than {a.ablation[0]}: compare precisions of one pair")
    scores = [config_scores(contract, d, read_rows(d["tasks"], contract.sha256)) for d in docs]
    speed, speed_cmd = None, None
    if a.speed:
        sd = json.loads(a.speed.read_text())
        speed_cmd = sd.get("command")
        speed = {n: v["tok_s"] for n, v in speed_of(sd).items()}
    t = table(contract, docs, scores, speed)
    if a.json:
        a.json.write_text(json.dumps(t, indent=2) + "\n")
    text = markdown(t, contract, [d["command"] for d in docs], speed_cmd)
    if a.md:
        write_section(a.md, f"<!-- {a.key}:start -->", f"<!-- {a.key}:end -->", a.title, text)
    print(text)
    return 0


def speed_of(bench: dict) -> dict[str, dict]:
    """precision -> its row of `macaronic bench --only precision` (32 streams through the server)."""
    return {v["label"]: v for v in (bench.get("serve_precision") or {}).get("variants", [])
            if "tok_s" in v and v["label"] in ("fp32", "bf16", "int8", "int4")}


if __name__ == "__main__":
    raise SystemExit(main())
