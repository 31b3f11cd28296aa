"""The evolve summary as a markdown table: per generation, each suite's score with its 95%
interval and its change against the parent, the strata changes, the decision and the changes.
Pure text from report.json's content; the caller writes it."""

from __future__ import annotations


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ci(ci) -> str:
    return "" if not ci else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def _change(ch: dict) -> str:
    step = ch.get("step", "?")
    if step == "router_refit":
        return (f"router refit on {ch.get('train_examples')} logged turns, policy {ch.get('policy')} "
                f"(dev macro recall {ch.get('dev_macro_recall', {}).get(ch.get('policy'))})")
    if step == "rft":
        return (f"rft {ch['role']}: {ch['successes']} successes, "
                + (f"retrained {ch.get('train_steps')} steps" if ch.get("retrained") else f"not retrained ({ch.get('reason')})"))
    if step == "harness_edit":
        return f"harness edit {ch.get('file')}: {ch.get('note', '')}"
    return step


def markdown(summary: dict) -> str:
    gens = summary["generations"]
    suites = list(gens[0]["suites"]) if gens else []
    out = [f"Contract `{summary['contract']['id']}` (sha256 `{summary['contract']['sha256'][:16]}...`); "
           f"champion `{(summary.get('champion') or '-')[:12]}`.", ""]
    out.append("| gen | pair | decision | " + " | ".join(suites) + " |")
    out.append("|---|---|---|" + "---|" * len(suites))
    for g in gens:
        cells = []
        for s in suites:
            b = g["suites"][s]
            cell = f"{_f(b['score'])}{_ci(b['ci95'])}"
            if b.get("delta") is not None:
                cell += f"<br>Δ {b['delta']:+.3f}{_ci(b['delta_ci95'])}"
            cells.append(f"n={b['n']}: {cell}")
        dec = g["decision"] + (f" ({', '.join(g['failed_rules'])})" if g.get("failed_rules") else "")
        out.append(f"| {g['generation']} | `{g['pair_id'][:10]}` | {dec} | " + " | ".join(cells) + " |")
    out += ["", "| gen | easy Δ | mid Δ | hard Δ | what changed |", "|---|---|---|---|---|"]
    for g in gens:
        st = [g["strata"].get(k, {}) for k in ("easy", "mid", "hard")]
        cells = [("-" if s.get("delta") is None else f"n={s['n']}: {s['delta']:+.3f}{_ci(s['delta_ci95'])}") for s in st]
        what = "; ".join(_change(c) for c in g["changes"]) or "(reference)"
        out.append(f"| {g['generation']} | " + " | ".join(cells) + f" | {what} |")
    return "\n".join(out) + "\n"
