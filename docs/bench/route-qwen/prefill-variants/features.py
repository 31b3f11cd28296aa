"""Features for choosing the prefill head's inputs (docs/LOG.md 2026-12-07, twentieth session): the
prefill views (mean, last over the user turn, residual entering layer 16, the served layout) and the
request's token-embedding chat views of the fit's train/dev turns and both held-out sets, plus the
shipped request-alone cascade's decisions on the held-out sets; `variants.py DIR` fits the variants.

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 python docs/bench/route-qwen/prefill-variants/features.py DIR
"""
import json, sys, time, numpy as np, torch
from macaronic.engine.llm import load_default_llm
from macaronic.harness import load_bundle
from macaronic.router.data import router_fit_data, load_routing_data
from macaronic.router.handwritten import load_handwritten
from macaronic.router.features import prefill_features, head_features
from macaronic.router.conversation import request_text
from macaronic.router.shipped import load_shipped
torch.set_num_threads(2)
llm = load_default_llm(base="qwen2.5-coder-0.5b")
bundle = load_bundle()
router = load_shipped(llm, bundle)
train, dev = router_fit_data()
sets = {"train": [e for e in train if e.get("kind") != "tool_result"], "dev": [e for e in dev if e.get("kind") != "tool_result"],
        "template": load_routing_data("test"), "hand": load_handwritten("test")}
out = {}
t0 = time.time()
for k, ex in sets.items():
    out[f"{k}_prefill"] = prefill_features(llm, bundle, [e["messages"] for e in ex], 16)[:, :2 * llm.args.dim]
    out[f"{k}_emb"] = head_features(llm, [request_text(e["messages"]) for e in ex], ("chatmean", "chatlast"), layer=0)
    print(k, len(ex), f"{time.time()-t0:.0f}s", flush=True)
# the shipped cascade's decisions on the test sets
for k in ("template", "hand"):
    ds = router.route_many([e["messages"] for e in sets[k]])
    out[f"{k}_cascade"] = np.array([d.role for d in ds])
    print(k, "cascade", f"{time.time()-t0:.0f}s", flush=True)
np.savez(sys.argv[1] + "/prefill-feats.npz", **out)
json.dump({k: [{"id": e["id"], "label": e["label"], "kind": e["kind"], "twin": e.get("twin"), "messages": e["messages"]} for e in v] for k, v in sets.items()},
          open(sys.argv[1] + "/prefill-sets.json", "w"))
llm.close()
