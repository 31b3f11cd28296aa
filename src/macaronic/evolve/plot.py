"""The evolve report as a PNG: per-suite scores and per-stratum deltas across generations.

Reads the summary dict (report.json's content); draws with matplotlib's Agg backend; knows
nothing about how the numbers were made.
"""

from __future__ import annotations

from pathlib import Path


def plot(summary: dict, out: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gens = summary["generations"]
    xs = [g["generation"] for g in gens]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    suites = list(gens[0]["suites"]) if gens else []
    for i, name in enumerate(suites):
        ys, lo, hi = [], [], []
        for g in gens:
            s = g["suites"].get(name, {})
            y, ci = s.get("score"), s.get("ci95")
            ys.append(float("nan") if y is None else y)
            lo.append(0 if ci is None or y is None else y - ci[0])
            hi.append(0 if ci is None or y is None else ci[1] - y)
        off = (i - len(suites) / 2) * 0.06
        a1.errorbar([x + off for x in xs], ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
    for g in gens:
        mark = {"accept": "accepted", "reject": "rejected", "reference": "reference"}.get(g["decision"], g["decision"])
        a1.annotate(mark, (g["generation"], 1.02), ha="center", fontsize=8, annotation_clip=False)
    a1.set_xticks(xs)
    a1.set_ylim(-0.02, 1.0)
    a1.set_xlabel("generation (each point: that generation's candidate on the sealed test split)")
    a1.set_ylabel("score (95% bootstrap CI)")
    a1.set_title(f"suites under {summary['contract']['id']}", pad=18)
    a1.legend(fontsize=8, loc="upper left")
    for j, st in enumerate(("easy", "mid", "hard")):
        pts = [(g["generation"], g["strata"][st]) for g in gens if g["strata"].get(st, {}).get("delta") is not None]
        if not pts:
            continue
        x = [p[0] + (j - 1) * 0.1 for p in pts]
        y = [p[1]["delta"] for p in pts]
        lo = [p[1]["delta"] - p[1]["delta_ci95"][0] for p in pts]
        hi = [p[1]["delta_ci95"][1] - p[1]["delta"] for p in pts]
        a2.errorbar(x, y, yerr=[lo, hi], marker="s", capsize=3, linestyle="none",
                    label=f"{st} (n={pts[0][1]['n']})")
    a2.axhline(0, color="gray", linewidth=0.8)
    a2.set_xticks(xs)
    a2.set_xlabel("generation")
    a2.set_ylabel("candidate - parent (paired 95% CI)")
    a2.set_title("change per difficulty stratum")
    a2.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
