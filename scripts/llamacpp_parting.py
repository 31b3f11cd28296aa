"""Where our greedy reply and llama.cpp's part, which token does llama.cpp itself rank first? (issue 40)

For each given HumanEval prompt (as the coding suite asks it): llama.cpp's server (as it starts by
default) and our fp32 path on the dequantized weights decode greedily to the reply's end or N tokens;
at the first token where they part, llama.cpp is asked again for its top log-probabilities after the
shared prefix (`n_probs`, the prefix in one prefill), and our model scores the same prefix. Per prompt:
the two greedy tokens and both sides' top two with their log-probabilities. When llama.cpp's own top
token is ours, its greedy decode and its prefill disagree: its decode path's rounding, not the weights,
chose the token.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/llamacpp_parting.py --prompts 0,17,20,26,32 --json docs/bench/llamacpp-parting.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

BASE = "qwen2.5-coder-0.5b"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default="0,17,20,26,32", help="HumanEval problem indices, comma-separated")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    import torch

    from macaronic import llamacpp
    from macaronic.bench.llamacpp_agreement import humaneval_asks
    from macaronic.bench.suite import make_llm
    from macaronic.engine import bases
    from macaronic.engine.base import base_gguf, load_base
    from macaronic.engine.kvcache import KVBuffer
    from macaronic.engine.llm import load_tokenizer
    from macaronic.engine.model import SeqSlice
    from macaronic.engine.sampling import SamplingParams

    torch.set_num_threads(a.threads)
    t0 = time.time()
    which = [int(i) for i in a.prompts.split(",")]
    b = load_base(BASE)
    tok = load_tokenizer(b.path)
    llm = make_llm(b, tok, max_batch=len(which), prefix_cache=False)
    ids = [llm.encode_chat(m) for m in humaneval_asks(which)]
    eos = set(llm.engine._default_stop_ids())
    hs = [llm.submit(p, None, SamplingParams(max_tokens=a.tokens)) for p in ids]
    ours = []
    for h in hs:
        h.result()
        ours.append([t for t in h.output_ids if t not in eos])
    llm.close()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        gguf = base_gguf(BASE, scratch=Path(tmp) / bases.get(BASE).gguf)
        with llamacpp.Server(gguf, (), threads=a.threads, ctx=4096, binary=llamacpp.build(log=print),
                             log=Path(tmp) / "llama-server.log") as srv:
            for i, p, o in zip(which, ids, ours):
                r = srv.post("/completion", {"prompt": p, "n_predict": a.tokens, "temperature": 0.0, "top_k": 1,
                                             "cache_prompt": False, "return_tokens": True})
                theirs = [t for t in r["tokens"] if t not in eos]
                f = next((k for k, (x, y) in enumerate(zip(o, theirs)) if x != y), None)
                row = {"problem": i, "parts_at": f}
                if f is not None:
                    q = srv.post("/completion", {"prompt": p + theirs[:f], "n_predict": 1, "temperature": 0.0, "top_k": 1,
                                                 "cache_prompt": False, "n_probs": 2, "post_sampling_probs": False})
                    top = q["completion_probabilities"][0]["top_logprobs"]
                    seq = torch.tensor(p + theirs[:f])
                    kv = KVBuffer(b.args, len(seq) + 4, b.model.dtype)
                    with torch.no_grad():
                        lp = torch.log_softmax(b.model.decode(seq, [SeqSlice(kv, len(seq))], logits="last")[-1].float(), -1)
                    mine = lp.topk(2)
                    row.update({"llamacpp_greedy": tok.decode([theirs[f]]), "ours_greedy": tok.decode([o[f]]),
                                "llamacpp_prefill_top2": [(x["token"], round(x["logprob"], 4)) for x in top[:2]],
                                "ours_prefill_top2": [(tok.decode([int(t)]), round(float(v), 4))
                                                      for v, t in zip(mine.values, mine.indices)]})
                    row["llamacpp_prefill_agrees_with_ours"] = top[0]["id"] == o[f]
                rows.append(row)
                print(json.dumps(row), flush=True)
    out = {"base": BASE, "tokens": a.tokens, "threads": a.threads, "llamacpp": llamacpp.VERSION, "rows": rows,
           "seconds": round(time.time() - t0), "at": time.strftime("%Y-%m-%d %H:%M:%S"),
           "command": "OMP_NUM_THREADS=2 .venv/bin/python scripts/llamacpp_parting.py " + " ".join(sys.argv[1:])}
    Path(a.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
