"""The route read from the answer's own prefill against the shipped cascade, paired per held-out turn,
from one `macaronic route bench` report that scored both (`--policies cascade,prefill`; its per-turn
rows). Prints accuracy, macro-F1 and the accuracy difference with its 95% paired bootstrap per set.

    python docs/bench/route-qwen/prefill_compare.py docs/bench/route-qwen/route-bench-prefill.json
    # --only PREFIX: only the turns whose id starts with it (one writer: --only hw/w26/)
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
report = json.load(open(args[0]))
new, old = (args[1:] + ["prefill", "cascade"][len(args[1:]):])[:2]
print(f"| set | turns | {old} acc / macro-F1 | {new} acc / macro-F1 | {new} − {old}, accuracy |")
print("|---|---:|---|---|---|")
for name, rows in report["sets"].items():
    a, b = {r["id"]: r for r in rows[new]["rows"]}, {r["id"]: r for r in rows[old]["rows"]}
    ids = [i for i in a if i in b and i.startswith(only)]
    if not ids:
        continue
    ok_new = np.array([a[i]["pred"] == a[i]["label"] for i in ids], float)
    ok_old = np.array([b[i]["pred"] == b[i]["label"] for i in ids], float)
    d, (lo, hi) = paired_bootstrap(ok_new, ok_old)
    f1 = {k: macro_f1([r[i]["label"] for i in ids], [r[i]["pred"] for i in ids]) for k, r in ((new, a), (old, b))}
    print(f"| {name}{' ' + only if only else ''} | {len(ids)} | {ok_old.mean():.3f} / {f1[old]:.3f} | {ok_new.mean():.3f} / {f1[new]:.3f} | "
          f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
