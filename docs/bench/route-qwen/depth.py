"""Where Qwen's own route head should read: the shipped head's views (chatmean + chatlast of the
request alone as a user message in the chat template) of the bare default base (Qwen2.5-Coder-0.5B,
served precision: int4 weights, bf16 activations) at each depth, from the token embeddings (depth 0)
to the final norm, against the shipped router's head (SmolLM2-135M, layer 15 of 30) on the same
turns. Same data as `macaronic route fit` (the router's fit train/dev: templates, hand-written train
writers, injections, multi-turn, bait; tool results left out: stickiness owns them); test: the
hand-written held-out writers and the template families' test split. One forward per batch gives
every depth (the residual kept at each layer). Also: what each depth costs per route (one request
at a time through the engine, as serving does), and a lexical baseline (TF-IDF of word and
character n-grams, logistic regression: no model at all).

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 python docs/bench/route-qwen/depth.py OUT.json [FEATURES.npz]
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from macaronic.contract.stats import paired_bootstrap
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.llm import load_default_llm
from macaronic.engine.model import SeqSlice
from macaronic.harness import load_bundle
from macaronic.router.bench import load_routing_data
from macaronic.router.conversation import request_text
from macaronic.router.data import router_fit_data
from macaronic.router.features import chat_ids, head_features
from macaronic.router.handwritten import load_handwritten
from macaronic.router.head import HeadPolicy, _macro_f1
from macaronic.router.shipped import load_shipped

torch.set_num_threads(2)
OUT = Path(sys.argv[1])
CACHE = Path(sys.argv[2]) if len(sys.argv) > 2 else OUT.with_suffix(".npz")
t0 = time.time()
say = lambda m: print(f"[{time.time() - t0:6.0f}s] {m}", file=sys.stderr, flush=True)  # noqa: E731

train, dev = router_fit_data()
sets = {"train": train, "dev": dev, "hand": load_handwritten("test"), "template": load_routing_data("test")}
sets = {k: [e for e in v if e.get("kind") != "tool_result"] for k, v in sets.items()}
texts = sorted({request_text(e["messages"]) for v in sets.values() for e in v})
say(f"{len(texts)} texts; " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()))

llm = load_default_llm(with_adapters=False, base="qwen2.5-coder-0.5b")
model, L = llm.base.model, llm.args.n_layers
DEPTHS = [0, 1, 2, 3, 4, 6, 8, 12, 16, 20, L]  # L: the final norm


@torch.inference_mode()
def views(batch: list[list[int]]) -> np.ndarray:
    """[N, len(DEPTHS), 2, D]: chatmean and chatlast at every depth, one varlen forward."""
    seqs = []
    for ids in batch:
        kv = KVBuffer(llm.args, len(ids), model.dtype)
        kv.keep_residual([d for d in DEPTHS if 0 < d < L], llm.args.dim)
        seqs.append(SeqSlice(kv, len(ids)))
    tokens = torch.tensor([t for ids in batch for t in ids])
    final = model.score(tokens, seqs)
    emb = model.embed[tokens].float()
    out, off = np.zeros((len(batch), len(DEPTHS), 2, llm.args.dim), np.float32), 0
    for i, (ids, s) in enumerate(zip(batch, seqs)):
        n = len(ids)
        for j, d in enumerate(DEPTHS):
            h = emb[off:off + n] if d == 0 else final[off:off + n].float() if d == L else s.kv.resid[d][:n].float()
            out[i, j, 0], out[i, j, 1] = h.mean(0).numpy(), h[-1].numpy()
        off += n
    return out


if CACHE.is_file() and list(np.load(CACHE)["texts"]) == texts:
    F = np.load(CACHE)["F"]
    say("features from cache")
else:
    rows = []
    for i in range(0, len(texts), 16):
        rows.append(views([chat_ids(llm, t) for t in texts[i:i + 16]]))
        if i % 320 == 0:
            say(f"features {i + 16} / {len(texts)}")
    F = np.concatenate(rows)
    np.savez(CACHE, texts=np.array(texts, dtype=str), F=F.astype(np.float16))
index = {t: i for i, t in enumerate(texts)}
X = {k: F[[index[request_text(e["messages"])] for e in v]].astype(np.float32) for k, v in sets.items()}
y = {k: [e["label"] for e in v] for k, v in sets.items()}
# a check that the kept residuals are the engine's early exit (float noise between batch shapes only)
probe_texts = sets["hand"][:4]
direct = head_features(llm, [request_text(e["messages"]) for e in probe_texts], ("chatmean", "chatlast"), layer=2)
check = float(np.abs(direct - X["hand"][:4, DEPTHS.index(2)].reshape(4, -1)).max())
say(f"max |engine early exit - kept residual| at depth 2: {check:.3g}")


def score(pred: list[str], setname: str, routes) -> dict:
    truth = np.array([routes.index(l) for l in y[setname]])
    p = np.array([routes.index(q) for q in pred])
    return {"accuracy": float((p == truth).mean()), "macro_f1": _macro_f1(truth, p, len(routes)),
            "correct": (p == truth).astype(int).tolist()}


report = {"base": "qwen2.5-coder-0.5b", "precision": llm.base.precision, "n_layers": L,
          "n": {k: len(v) for k, v in sets.items()}, "check_max_abs": check, "depths": {}}
for j, d in enumerate(DEPTHS):
    f = lambda k: X[k][:, j].reshape(len(X[k]), -1)  # noqa: E731
    head = HeadPolicy.fit(f("train"), y["train"], f("dev"), y["dev"], ("chatmean", "chatlast"),
                          layer=None if d == L else d)
    row = {"c": head.c}
    for s in ("dev", "hand", "template"):  # dev: where the depth is chosen (C is chosen on it too)
        row[s] = score([head.routes[int(i)] for i in head.predict(f(s))[0].argmax(1)], s, list(head.routes))
    report["depths"][str(d)] = row
    say(f"depth {d:2d}: hand acc {row['hand']['accuracy']:.3f} F1 {row['hand']['macro_f1']:.3f}; "
        f"template acc {row['template']['accuracy']:.3f} (C {head.c})")

# the lexical baseline: no model
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline, make_union  # noqa: E402

tx = {k: [request_text(e["messages"]) for e in v] for k, v in sets.items()}
best = None
for c in (1.0, 3.0, 10.0, 30.0):
    lex = make_pipeline(make_union(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                                   TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)),
                        LogisticRegression(C=c, max_iter=3000)).fit(tx["train"], y["train"])
    routes = sorted(set(y["train"]))
    f1 = score(list(lex.predict(tx["dev"])), "dev", routes)["macro_f1"]
    if best is None or f1 > best[0] + 1e-9:
        best = (f1, c, lex)
_, c, lex = best
report["lexical"] = {"c": c, **{s: score(list(lex.predict(tx[s])), s, routes) for s in ("hand", "template")}}
say(f"lexical: hand acc {report['lexical']['hand']['accuracy']:.3f} F1 {report['lexical']['hand']['macro_f1']:.3f}")

# SmolLM2-135M's shipped router head (layer 15; what routed for Qwen before it had a state of its
# own), head alone, on the same turns, at the same precision
shipped = load_shipped(load_default_llm(with_adapters=True, base="smollm2-135m-instruct"), load_bundle())
sm = shipped.state.head
report["shipped_head"] = {"layer": sm.layer, "state_id": shipped.state.id}
for s in ("hand", "template"):
    Z = shipped.head_embed(tx[s], {})
    report["shipped_head"][s] = score([sm.routes[int(i)] for i in sm.predict(Z)[0].argmax(1)], s, list(sm.routes))
say(f"shipped SmolLM2 head: hand acc {report['shipped_head']['hand']['accuracy']:.3f} "
    f"F1 {report['shipped_head']['hand']['macro_f1']:.3f}")

# cost per route, one request at a time through the engine (served path), 30 hand-written turns
rng = np.random.default_rng(0)
sample = [tx["hand"][i] for i in rng.choice(len(tx["hand"]), 30, replace=False)]
ids = [chat_ids(llm, t) for t in sample]
cost = {}
for d in DEPTHS[1:]:
    ms = []
    for x in ids:
        t = time.perf_counter()
        llm.hidden_views([x], layer=None if d == L else d)
        ms.append((time.perf_counter() - t) * 1e3)
    cost[str(d)] = {"p50_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95))}
sm_ids = [chat_ids(shipped.backbone, t) for t in sample]
ms = []
for x in sm_ids:
    t = time.perf_counter()
    shipped.backbone.hidden_views([x], layer=sm.layer)
    ms.append((time.perf_counter() - t) * 1e3)
cost["shipped_smollm2"] = {"p50_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95))}
report["cost"] = {"tokens_p50": float(np.median([len(x) for x in ids])), "threads": 2, "per_depth": cost}
say("cost: " + ", ".join(f"{k} {v['p50_ms']:.1f}" for k, v in cost.items()))

# paired: each depth against the shipped head on the hand-written writers
for d, row in report["depths"].items():
    for s in ("hand", "template"):
        diff, ci = paired_bootstrap(np.array(row[s]["correct"], float), np.array(report["shipped_head"][s]["correct"], float))
        row[s]["vs_shipped"] = {"diff": diff, "ci95": ci}
# the depth is chosen on dev: the best there, and each depth against it
best = max(report["depths"], key=lambda d: report["depths"][d]["dev"]["accuracy"])
report["dev_best"] = best
for d, row in report["depths"].items():
    diff, ci = paired_bootstrap(np.array(row["dev"]["correct"], float), np.array(report["depths"][best]["dev"]["correct"], float))
    row["dev"]["vs_dev_best"] = {"diff": diff, "ci95": ci}
report["seconds"] = round(time.time() - t0, 1)
OUT.write_text(json.dumps(report, indent=1) + "\n")
print(json.dumps({d: {s: {k: r[s][k] for k in ("accuracy", "macro_f1", "vs_shipped")} for s in ("hand",)}
                  for d, r in report["depths"].items()}, indent=1))
