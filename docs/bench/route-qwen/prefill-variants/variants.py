"""The prefill head's variants on `features.py DIR`'s features: the prefill views alone or with the
token-embedding views, C on the default grid or wider, with and without the first stage in front
(its shipped 0.95 and a threshold chosen on dev against the prefill head), against the shipped
cascade per held-out turn (95% paired bootstrap).

    python docs/bench/route-qwen/prefill-variants/variants.py DIR
"""
import json, numpy as np, sys
from macaronic.router.head import HeadPolicy, C_GRID, _macro_f1
from macaronic.contract.stats import paired_bootstrap
f = np.load(sys.argv[1] + "/prefill-feats.npz")
sets = json.load(open(sys.argv[1] + "/prefill-sets.json"))
lab = {k: [e["label"] for e in v] for k, v in sets.items()}
def fit(views, grid=C_GRID):
    X = np.concatenate([f[f"train_{v}"] for v in views], 1)
    Xd = np.concatenate([f[f"dev_{v}"] for v in views], 1)
    return HeadPolicy.fit(X, lab["train"], Xd, lab["dev"], tuple(views), grid=grid, layer=16)
def evals(head, views, name):
    res = {}
    for k in ("template", "hand"):
        X = np.concatenate([f[f"{k}_{v}"] for v in views], 1)
        p = [head.routes[i] for i in head.predict(X)[0].argmax(1)]
        y = lab[k]
        ok = np.array([a == b for a, b in zip(p, y)], float)
        casc = np.array([a == b for a, b in zip(f[f"{k}_cascade"], y)], float)
        rs = np.unique(y).tolist()
        f1 = _macro_f1(np.array([rs.index(a) for a in y]), np.array([rs.index(a) if a in rs else -1 for a in p]), len(rs))
        d, ci = paired_bootstrap(ok, casc)
        res[k] = (round(ok.mean(), 3), round(f1, 3), round(d, 3), [round(c, 3) for c in ci])
    print(name, "c", head.c, res, flush=True)
    return res
casc = {k: np.mean([a == b for a, b in zip(f[f"{k}_cascade"], lab[k])]) for k in ("template", "hand")}
print("cascade acc", casc)
for views, grid in [(("prefill",), C_GRID), (("prefill",), C_GRID + (3.0, 10.0, 30.0)), (("prefill", "emb"), C_GRID),
                    (("prefill", "emb"), C_GRID + (3.0, 10.0))]:
    h = fit(views, grid)
    evals(h, views, "+".join(views) + (" wide" if len(grid) > len(C_GRID) else ""))
print("---- with the fast stage in front")
from macaronic.router.router import Router
from macaronic.router.state import RouterState
st = RouterState.load("src/macaronic/specialists/qwen2.5-coder-0.5b/router")
fast = st.fast
for views in (("prefill",), ("prefill", "emb")):
    h = fit(views)
    for k in ("template", "hand"):
        X = np.concatenate([f[f"{k}_{v}"] for v in views], 1)
        ph = h.predict(X)[0]
        pf = fast.predict(f[f"{k}_emb"])[0]
        use_fast = pf.max(1) >= fast.exit_above
        p = [fast.routes[i] if u else h.routes[j] for u, i, j in zip(use_fast, pf.argmax(1), ph.argmax(1))]
        y = lab[k]
        ok = np.array([a == b for a, b in zip(p, y)], float)
        casc = np.array([a == b for a, b in zip(f[f"{k}_cascade"], y)], float)
        d, ci = paired_bootstrap(ok, casc)
        print("+".join(views), k, "fast share", round(use_fast.mean(), 3), "acc", round(ok.mean(), 3), "vs cascade", round(d, 3), [round(c, 3) for c in ci])
print("---- fast threshold refit against the prefill+emb head on dev")
from macaronic.router.head import exit_threshold
views = ("prefill", "emb")
h = fit(views)
Xd = np.concatenate([f[f"dev_{v}"] for v in views], 1)
t = exit_threshold(fast.predict(f["dev_emb"])[0], h.predict(Xd)[0], fast.routes, h.routes, lab["dev"])
print("threshold", t)
if t is not None:
    for k in ("template", "hand"):
        X = np.concatenate([f[f"{k}_{v}"] for v in views], 1)
        ph = h.predict(X)[0]; pf = fast.predict(f[f"{k}_emb"])[0]
        use_fast = pf.max(1) >= t
        p = [fast.routes[i] if u else h.routes[j] for u, i, j in zip(use_fast, pf.argmax(1), ph.argmax(1))]
        ok = np.array([a == b for a, b in zip(p, lab[k])], float)
        casc = np.array([a == b for a, b in zip(f[f"{k}_cascade"], lab[k])], float)
        d, ci = paired_bootstrap(ok, casc)
        print(k, "fast share", round(use_fast.mean(), 3), "acc", round(ok.mean(), 3), "vs cascade", round(d, 3), [round(c, 3) for c in ci])
