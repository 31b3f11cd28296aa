#!/usr/bin/env python3
"""Two router states on the held-out hand-written turns, turn by turn.

Rows come from `macaronic route classify` (one JSON line out per line in), fed the test split:

    .venv/bin/python scripts/route_hand_compare.py --export turns.jsonl
    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 macaronic route classify --base qwen2.5-coder-0.5b \
        [--state OLD_STATE_DIR] < turns.jsonl > old.jsonl        # and again for the other state
    .venv/bin/python scripts/route_hand_compare.py turns.jsonl old.jsonl new.jsonl [--writer w24]

Prints accuracy and macro-F1 per state (all writers; the writers other than --writer; --writer
alone), the injection pairs whose route differs from their clean twin's (a flip), and each turn
the two states route differently. Macro-F1 is the route bench's (`macaronic.router.metrics`).
"""

from __future__ import annotations

import argparse
import json
import sys

def flips(turns: list[dict], routes: dict[str, str]) -> list[str]:
    return [t["id"] for t in turns if t["kind"] == "injection" and t["twin"] in routes
            and routes[t["id"]] != routes[t["twin"]]]


def summary(turns: list[dict], routes: dict[str, str], writer: str | None) -> dict:
    from macaronic.router.metrics import macro_f1

    out = {}
    parts = {"all": turns}
    if writer:
        parts[f"not {writer}"] = [t for t in turns if t["writer"] != writer]
        parts[writer] = [t for t in turns if t["writer"] == writer]
    for name, part in parts.items():
        labels, preds = [t["label"] for t in part], [routes[t["id"]] for t in part]
        inj = [t for t in part if t["kind"] == "injection"]
        out[name] = {"turns": len(part), "accuracy": sum(g == p for g, p in zip(labels, preds)) / len(part),
                     "macro_f1": macro_f1(labels, preds), "injection_pairs": len(inj),
                     "flips": len(flips(part, routes))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="turns.jsonl, then one classify output per state")
    ap.add_argument("--export", help="write the test split's hand-written turns here and exit")
    ap.add_argument("--writer", help="also report this writer alone and the rest without it")
    args = ap.parse_args(argv)
    if args.export:
        from macaronic.router.handwritten import load_handwritten

        with open(args.export, "w") as f:
            for t in load_handwritten("test"):
                f.write(json.dumps({k: t.get(k) for k in ("id", "label", "writer", "kind", "twin", "messages")},
                                   ensure_ascii=False) + "\n")
        return 0
    if len(args.files) < 2:
        ap.error("give turns.jsonl and at least one classify output")
    turns = [json.loads(line) for line in open(args.files[0])]
    states = {}
    for path in args.files[1:]:
        rows = [json.loads(line) for line in open(path)]
        if len(rows) != len(turns):
            sys.exit(f"{path}: {len(rows)} rows for {len(turns)} turns")
        states[path] = {t["id"]: r["role"] for t, r in zip(turns, rows)}
    by_id = {t["id"]: t for t in turns}
    for path, routes in states.items():
        print(f"== {path}")
        for name, s in summary(turns, routes, args.writer).items():
            print(f"  {name:>10}: {s['turns']} turns, accuracy {s['accuracy']:.3f}, macro-F1 {s['macro_f1']:.3f}, "
                  f"injection flips {s['flips']} of {s['injection_pairs']}")
        for i in flips(turns, routes):
            t = by_id[i]
            print(f"  flip {i}: label {t['label']}, clean -> {routes[t['twin']]}, injected -> {routes[i]}")
    if len(states) == 2:
        (a, ra), (b, rb) = states.items()
        print("== turns routed differently")
        for t in turns:
            if ra[t["id"]] != rb[t["id"]]:
                print(f"  {t['id']} ({t['label']}): {ra[t['id']]} -> {rb[t['id']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
