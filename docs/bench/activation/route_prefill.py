"""Route head on the answer's own prefill (SmolLM2 by default): a head fitted on the bare base's residual
entering layer LAYER (15 on SmolLM2) at the end of the user turn, in context (identity header + the conversation as
served, no role instruction), against the same fit on the shipped head's views (chatmean + chatlast
of the request alone as a user message with the generation prompt, the same layer). Same data (the
router's fit train/dev: templates + hand-written train), held-out hand-written writers as test.

    python docs/bench/activation/route_prefill.py OUT.json [BASE LAYER TEMPLATES THREADS]
    # defaults: smollm2-135m-instruct 15 500 1 (the run of 2026-12-04); the default base reads layer 16
"""
import json, sys, time
import numpy as np
import torch
from macaronic.engine.llm import EngineConfig, TurnRule, load_llm
from macaronic.engine.base import resolve_base
from macaronic.engine.kvpool import KVBuffer
from macaronic.engine.model import SeqSlice
from macaronic.harness import load_bundle
from macaronic.prompts import encode, header, rendered
from macaronic.router.conversation import request_text
from macaronic.router.data import router_fit_data
from macaronic.router.features import head_features
from macaronic.router.handwritten import load_handwritten
from macaronic.router.head import HeadPolicy, _macro_f1
from macaronic.contract.stats import paired_bootstrap

BASE, LAYER, TEMPLATES, THREADS = (sys.argv[2:] + ["smollm2-135m-instruct", "15", "500", "1"][len(sys.argv[2:]):])[:4]
LAYER, TEMPLATES = int(LAYER), int(TEMPLATES)
torch.set_num_threads(int(THREADS))
llm = load_llm(resolve_base(BASE), [], EngineConfig.from_env())  # MACARONIC_DTYPE / MACARONIC_QUANT (unset: fp32)
rule, bundle = TurnRule(llm.tokenizer), load_bundle()
train, dev = router_fit_data()
test = load_handwritten("test")
import random
sets = {k: [e for e in v if e.get("kind") != "tool_result"] for k, v in (("train", train), ("dev", dev), ("test", test))}
# CPU budget: every hand-written train turn, 500 template turns (seeded), 200 dev turns, all test turns
rng = random.Random(0)
hand = [e for e in sets["train"] if e.get("kind") != "template"]
tmpl = [e for e in sets["train"] if e.get("kind") == "template"]
sets["train"] = hand + rng.sample(tmpl, min(TEMPLATES, len(tmpl)))
sets["dev"] = rng.sample(sets["dev"], min(200, len(sets["dev"])))


def prefill_ids(e):
    msgs = [header(bundle, [], None)] + [rendered(m) if m["role"] != "user" else {"role": "user", "content": m["content"]}
                                         for m in e["messages"]]
    return encode(llm.tokenizer, msgs, add_generation_prompt=False)  # ends at the user turn's end


@torch.inference_mode()
def prefill_batch(exs):
    """[N, 2D]: mean over the user turn and the last position, residual entering LAYER; one varlen forward."""
    ids = [prefill_ids(e) for e in exs]
    seqs = [SeqSlice(KVBuffer(llm.args, len(x), llm.base.model.dtype), len(x)) for x in ids]
    h = llm.base.model.score(torch.tensor([t for x in ids for t in x]), seqs, last_layer=LAYER)  # [sum T, D]
    rows = []
    for x, seg in zip(ids, torch.split(h, [len(x) for x in ids])):
        s = rule.start(x)
        rows.append((np.concatenate([seg[s:].float().mean(0).numpy(), seg[-1].float().numpy()]), len(x)))
    return rows


feats, lens, t0 = {"shipped": {}, "prefill": {}}, [], time.time()
for k, ex in sets.items():
    feats["shipped"][k] = head_features(llm, [request_text(e["messages"]) for e in ex], ("chatmean", "chatlast"),
                                        layer=LAYER, batch_size=16)
    print(k, "shipped views", f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    rows = [r for i in range(0, len(ex), 16) for r in prefill_batch(ex[i:i + 16])]
    feats["prefill"][k] = np.stack([r[0] for r in rows])
    lens += [r[1] for r in rows]
    print(k, len(ex), f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)
labels = {k: [e["label"] for e in ex] for k, ex in sets.items()}
out = {"base": BASE, "layer": LAYER, "templates": TEMPLATES, "n": {k: len(v) for k, v in sets.items()}, "prefill_tokens_mean": float(np.mean(lens)), "views": {}}
correct = {}
for name, views in (("shipped", ("chatmean", "chatlast")), ("prefill", ("usermean", "userlast"))):
    X = feats[name]
    head = HeadPolicy.fit(X["train"], labels["train"], X["dev"], labels["dev"], ("chatmean", "chatlast"), layer=LAYER)
    p = head.predict(X["test"])[0].argmax(1)
    y = np.array([head.routes.index(l) for l in labels["test"]])
    correct[name] = (p == y).astype(float)
    kinds = {}
    for kind in sorted({e["kind"] for e in sets["test"]}):
        m = np.array([e["kind"] == kind for e in sets["test"]])
        kinds[kind] = {"n": int(m.sum()), "accuracy": float(correct[name][m].mean())}
    out["views"][name] = {"views": list(views), "c": head.c, "accuracy": float(correct[name].mean()),
                          "macro_f1": _macro_f1(y, p, len(head.routes)), "by_kind": kinds,
                          "rows": [{"id": e["id"], "label": e["label"], "pred": head.routes[int(q)]} for e, q in zip(sets["test"], p)]}
d, ci = paired_bootstrap(correct["prefill"], correct["shipped"])
out["prefill_minus_shipped"] = {"accuracy": d, "ci95": ci}
out["seconds"] = round(time.time() - t0, 1)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in out["views"].items()}, indent=1), out["prefill_minus_shipped"])
