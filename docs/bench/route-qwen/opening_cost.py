"""What keeping the chat template's opening saves a route (Qwen2.5-Coder-0.5B at its served
precision, int4 weights, bf16 activations, 2 threads): one route forward of each of 30 hand-written
held-out turns (seeded sample) at the head's layer and at layer 12, the whole sequence through
the engine against the opening kept (`LLM.hidden_views(prefix=...)`), interleaved, median of 3 per
turn; and the largest difference between the two views, against the views' scale.

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 python docs/bench/route-qwen/opening_cost.py OUT.json
"""
import json
import sys
import time

import numpy as np
import torch

from macaronic.engine.llm import load_default_llm
from macaronic.router.conversation import request_text
from macaronic.router.features import chat_ids, template_prefix
from macaronic.router.handwritten import load_handwritten

torch.set_num_threads(2)
llm = load_default_llm(with_adapters=False, base="qwen2.5-coder-0.5b")
opening = template_prefix(llm)
turns = [request_text(e["messages"]) for e in load_handwritten("test") if e["kind"] == "hand"]
sample = [turns[i] for i in np.random.default_rng(0).choice(len(turns), 30, replace=False)]
ids = [chat_ids(llm, t) for t in sample]
llm.hidden_views([ids[0]], layer=12, prefix=opening)  # the opening's own forward, once, out of the figures
out = {"base": "qwen2.5-coder-0.5b", "precision": llm.base.precision, "threads": 2, "opening_tokens": len(opening),
       "tokens_p50": float(np.median([len(x) for x in ids])), "layers": {}}
for layer in (12, 16):
    llm.hidden_views([ids[0]], layer=layer, prefix=opening)
    whole, kept, diff, scale = [], [], 0.0, 0.0
    for x in ids:
        for way, rows in ((None, whole), (opening, kept)):
            ms = []
            for _ in range(3):
                t0 = time.perf_counter()
                llm.hidden_views([x], layer=layer, prefix=way)
                ms.append((time.perf_counter() - t0) * 1e3)
            rows.append(float(np.median(ms)))
        a, b = llm.hidden_views([x], layer=layer), llm.hidden_views([x], layer=layer, prefix=opening)
        diff = max(diff, *(float((u - v).abs().max()) for u, v in zip(a, b)))
        scale = max(scale, *(float(u.abs().max()) for u in a))
    out["layers"][str(layer)] = {"whole_p50_ms": float(np.median(whole)), "kept_p50_ms": float(np.median(kept)),
                                 "ratio": float(np.median(kept) / np.median(whole)), "max_abs_diff": diff,
                                 "max_abs_view": scale}
    print(layer, out["layers"][str(layer)], file=sys.stderr, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
