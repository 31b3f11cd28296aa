"""The route read from the answer's own prefill against the shipped cascade, paired per held-out turn,
from one `macaronic route bench` report that scored both (`--policies cascade,prefill`; its per-turn
rows). Prints accuracy, macro-F1 and the accuracy difference with its 95% paired bootstrap per set.

    python docs/bench/route-qwen/prefill_compare.py docs/bench/route-qwen/route-bench-prefill.json
    # --only PREFIX: only the turns whose id starts with it (one writer: --only hw/w26/)
    # --against OLD.json: one policy (the first name given, default prefill) in this report against the
    #   same policy in an earlier report (two router states on the same turns)
"""
import json
import sys

import numpy as np

from macaronic.contract.stats import paired_bootstrap
from macaronic.router.bench import macro_f1

args = sys.argv[1:]
only = ""
if "--only" in args:
    i = args.index("--only")
    only, args = args[i + 1], args[:i] + args[i + 2:]
against = None
if "--against" in args:
    i = args.index("--against")
    against, args = json.load(open(args[i + 1])), args[:i] + args[i + 2:]
report = json.load(open(args[0]))
new, old = (args[1:] + ["prefill", "cascade"][len(args[1:]):])[:2]
if against is not None:  # the same policy in both reports: columns named by the reports' states
    old = new
names = (f"{new} {against['state_id'][:8]}", f"{new} {report['state_id'][:8]}") if against else (old, new)
print(f"| set | turns | {names[0]} acc / macro-F1 | {names[1]} acc / macro-F1 | {names[1]} − {names[0]}, accuracy |")
print("|---|---:|---|---|---|")
for name, rows in report["sets"].items():
    other = against["sets"][name] if against else rows
    a, b = {r["id"]: r for r in rows[new]["rows"]}, {r["id"]: r for r in other[old]["rows"]}
    ids = [i for i in a if i in b and i.startswith(only)]
    if not ids:
        continue
    ok_new = np.array([a[i]["pred"] == a[i]["label"] for i in ids], float)
    ok_old = np.array([b[i]["pred"] == b[i]["label"] for i in ids], float)
    d, (lo, hi) = paired_bootstrap(ok_new, ok_old)
    f1 = [macro_f1([r[i]["label"] for i in ids], [r[i]["pred"] for i in ids]) for r in (b, a)]
    print(f"| {name}{' ' + only if only else ''} | {len(ids)} | {ok_old.mean():.3f} / {f1[0]:.3f} | {ok_new.mean():.3f} / {f1[1]:.3f} | "
          f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
