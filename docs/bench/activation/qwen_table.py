"""The activation study on the default base (Qwen2.5-Coder-0.5B, 2026-12-07): the shipped genui and
agent adapters each warm-started for the same 40 steps on the same 160 examples, once under the
user-header rule (the shipped layout) and once under the assistant-header rule (the adapter switches
on at the reply's assistant header; no role instruction before the user turn). Paired over the same
items, assistant − user, 95% bootstrap (2,000 resamples, seed 0, `contract.stats.paired_bootstrap`).

    python docs/bench/activation/qwen_table.py docs/bench/activation
    # genui: qwen-genui-{user,assistant}-set{3,4}.json (`macaronic genui probe --set 3|4 --adapter-dir ...`)
    # agent: qwen-agent-{user,assistant}-{4x20,irr,4x40-from21}.json (`macaronic probe bfcl ... --models agent
    #   --adapter-dir ...`; the last with `--offset 20 --limit 40`)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from macaronic.contract.stats import paired_bootstrap


def genui(d: Path, arm: str) -> dict[str, dict]:
    out = {}
    for s in (3, 4):
        f = d / f"qwen-genui-{arm}-set{s}.json"
        if f.is_file():
            out.update({f"set{s}/{r['id']}": r for r in json.loads(f.read_text())["rows"]})
    return out


def bfcl(d: Path, arm: str) -> dict[str, dict]:
    out = {}
    for f in sorted(d.glob(f"qwen-agent-{arm}-*.json")):  # 4x20, irr, and 4x40-from21 (problems 21-60)
        if f.is_file():
            for cat, c in json.loads(f.read_text())["categories"].items():
                out.update({f"{cat}/{r['id']}": r for r in c["rows"]["agent"]})
    return out


def _num(v) -> float | None:
    return None if v in (None, "None") else float(v)


def row(name: str, u: dict, a: dict, key, keep=lambda k: True) -> dict | None:
    ids = [k for k in u if k in a and keep(k) and _num(key(u[k])) is not None and _num(key(a[k])) is not None]
    if not ids:
        return None
    xu, xa = [_num(key(u[k])) for k in ids], [_num(key(a[k])) for k in ids]
    diff, ci = paired_bootstrap(xa, xu)
    return {"measure": name, "n": len(ids), "user": sum(xu) / len(ids), "assistant": sum(xa) / len(ids),
            "assistant_minus_user": diff, "ci95": list(ci)}


def main(d: str) -> None:
    d = Path(d)
    rows = []
    gu, ga = genui(d, "user"), genui(d, "assistant")
    for s in ("set3", "set4", None):
        keep = (lambda k, s=s: s is None or k.startswith(s + "/"))
        label = s or "sets 3+4"
        rows += [row(f"genui {label}: components present", gu, ga, lambda r: r.get("coverage"), keep),
                 row(f"genui {label}: values shown", gu, ga, lambda r: r.get("shows"), keep)]
    bu, ba = bfcl(d, "user"), bfcl(d, "assistant")
    for cat in ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", None):
        keep = (lambda k, c=cat: c is None or k.split("/")[0] == c)
        rows.append(row(f"BFCL {cat or 'all'}", bu, ba, lambda r: r.get("passed"), keep))
    rows = [r for r in rows if r]
    (d / "qwen-table.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("| measure | n | user header | assistant header | assistant − user [95%] |\n|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['measure']} | {r['n']} | {r['user']:.3f} | {r['assistant']:.3f} | "
              f"{r['assistant_minus_user']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/activation")
