"""Which depth, chosen without the test split: the dev split alone is saturated (0.987-0.997 from
layer 8 up, C chosen on it too), so every depth's head is cross-fitted over train + dev, five folds
grouped by family (a family, and every turn made from it, is held out whole), C fixed at 0.3, and
each depth's out-of-fold correctness is compared with the best depth's (paired bootstrap). The
README's rule then takes the cheapest depth inside the best's interval. Reads the features that
depth.py kept (its FEATURES.npz).

    python docs/bench/route-qwen/depth_cv.py FEATURES.npz docs/bench/route-qwen/depth-cv.json
"""
import json
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from macaronic.contract.stats import paired_bootstrap
from macaronic.router.conversation import request_text
from macaronic.router.data import router_fit_data

DEPTHS = [0, 1, 2, 3, 4, 6, 8, 12, 16, 20, 24]
z = np.load(sys.argv[1])
index = {t: i for i, t in enumerate(z["texts"].tolist())}
F = z["F"]
train, dev = router_fit_data()
rows = [e for e in train + dev if e.get("kind") != "tool_result"]
X = F[[index[request_text(e["messages"])] for e in rows]].astype(np.float32)
y = np.array([e["label"] for e in rows])
groups = np.array([e.get("family") or e["id"] for e in rows])
out = {"n": len(rows), "folds": 5, "c": 0.3, "depths": {}}
for j, d in enumerate(DEPTHS):
    Xd = X[:, j].reshape(len(X), -1)
    correct = np.zeros(len(rows))
    for tr, te in GroupKFold(n_splits=5).split(Xd, y, groups):
        mu, sd = Xd[tr].mean(0), Xd[tr].std(0) + 1e-6
        clf = LogisticRegression(C=0.3, max_iter=3000).fit((Xd[tr] - mu) / sd, y[tr])
        correct[te] = clf.predict((Xd[te] - mu) / sd) == y[te]
    out["depths"][str(d)] = {"accuracy": float(correct.mean()), "correct": correct.astype(int).tolist()}
    print(d, round(correct.mean(), 4), file=sys.stderr, flush=True)
best = max(out["depths"], key=lambda d: out["depths"][d]["accuracy"])
out["best"] = best
for d, r in out["depths"].items():
    diff, ci = paired_bootstrap(np.array(r["correct"], float), np.array(out["depths"][best]["correct"], float))
    r["vs_best"] = {"diff": diff, "ci95": ci}
inside = [d for d in out["depths"] if out["depths"][d]["vs_best"]["ci95"][1] >= 0]
out["cheapest_inside"] = min(inside, key=int)
json.dump(out, open(sys.argv[2], "w"), indent=1)
for d, r in out["depths"].items():
    print(d, f"{r['accuracy']:.4f}", f"{r['vs_best']['diff']:+.4f}", r["vs_best"]["ci95"])
print("best", best, "cheapest inside", out["cheapest_inside"])
