"""How close are our logits to llama.cpp's on the same GGUF, step by step? (issue 40, item 1)

Greedy agreement (`macaronic bench --only agreement`) counts replies that stay identical, which one
near-tie decides. This measures the logits themselves: llama.cpp's server decodes the first P HumanEval
prompts greedily for N tokens and reports, at every step, the log-probability of the token it chose
(`n_probs`); each of our precisions then decodes the same tokens one step at a time (the decode path,
K/V cached) and takes its own log-probability of that token. Per precision: mean, median, 90th
percentile and max of |ours - llama.cpp's| over all steps.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/llamacpp_logprobs.py --json docs/bench/llamacpp-logprobs.json

A variant can run another commit's code: `DTYPE:QUANT@DIR/src` after `git archive COMMIT src | tar -x -C DIR`
runs that precision in a child process importing DIR/src (its native kernels built from that tree),
against the same llama.cpp reference; the child refuses to run if it imported anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = "qwen2.5-coder-0.5b"


def prompts(n: int):
    from macaronic.bench.llamacpp_agreement import humaneval_asks
    from macaronic.bench.suite import make_llm
    from macaronic.engine.base import load_base
    from macaronic.engine.llm import load_tokenizer

    b = load_base(BASE)
    llm = make_llm(b, load_tokenizer(b.path), max_batch=1, prefix_cache=False)
    ids = [llm.encode_chat(m) for m in humaneval_asks(range(n))]
    llm.close()
    return ids


def reference(ids, tokens: int, threads: int, work: Path, extra=(), name: str = "default") -> list[list[tuple[int, float]]]:
    from macaronic import llamacpp
    from macaronic.engine import bases
    from macaronic.engine.base import base_gguf

    gguf = base_gguf(BASE, scratch=work / bases.get(BASE).gguf)
    out = []
    with llamacpp.Server(gguf, (), threads=threads, ctx=4096, binary=llamacpp.build(log=print),
                         log=work / f"llama-server-{name}.log", extra=tuple(extra)) as srv:
        for p in ids:
            r = srv.post("/completion", {"prompt": p, "n_predict": tokens, "temperature": 0.0, "top_k": 1,
                                         "cache_prompt": False, "n_probs": 1, "post_sampling_probs": False})
            out.append([(c["id"], c["logprob"]) for c in r["completion_probabilities"]])
    return out


def distances(ids, ref, dtype: str, quant: str) -> list[float]:
    import torch

    from macaronic.engine.base import load_base
    from macaronic.engine.kvcache import KVBuffer
    from macaronic.engine.model import SeqSlice

    b = load_base(BASE, dtype=getattr(torch, dtype), quant=quant)
    out = []
    for p, r in zip(ids, ref):
        kv = KVBuffer(b.args, len(p) + len(r) + 4, b.model.dtype)
        with torch.no_grad():
            lg = b.model.decode(torch.tensor(p), [SeqSlice(kv, len(p))], logits="last")
            for t, lp in r:
                out.append(abs(torch.log_softmax(lg[-1].float(), -1)[t].item() - lp))
                lg = b.model.decode(torch.tensor([t]), [SeqSlice(kv, 1)], logits="last")
    return out


def summary(d: list[float]) -> dict:
    if not d:
        return {"steps": 0}
    d = sorted(d)
    return {"steps": len(d), "mean": round(statistics.mean(d), 5), "p50": round(d[len(d) // 2], 5),
            "p90": round(d[int(len(d) * 0.9)], 5), "max": round(d[-1], 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="float32:none,bfloat16:gguf,bfloat16:int4",
                    help="comma list of DTYPE:QUANT[@SRC] (SRC: a source tree to import for that row)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--child", nargs=3, metavar=("IDS_REF", "VARIANT", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one variant from another source tree: ids and reference from the parent
        tree = os.environ["MACARONIC_SRC_TREE"]
        sys.path.insert(0, tree)
        import macaronic

        if not str(Path(macaronic.__file__).resolve()).startswith(tree):
            raise SystemExit(f"the variant's tree {tree} was not imported (got {macaronic.__file__})")
        data = json.loads(Path(a.child[0]).read_text())
        import torch

        torch.set_num_threads(a.threads)
        dtype, quant = a.child[1].split(":")
        Path(a.child[2]).write_text(json.dumps(distances(data["ids"], data["ref"], dtype, quant)))
        return 0
    import torch

    torch.set_num_threads(a.threads)
    t0 = time.time()
    ids = prompts(a.prompts)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        from macaronic.bench.llamacpp_agreement import REFERENCES

        refs = {name: reference(ids, a.tokens, a.threads, work, flags, name) for name, flags in REFERENCES.items()}
        shared = work / "ids_ref.json"  # what a variant from another tree reads
        shared.write_text(json.dumps({"ids": ids, "ref": refs["default"]}))
        # llama.cpp against itself: up to where the two replies first part, both reported the
        # log-probability of the same token after the same tokens
        same = []
        for r0, r1 in zip(refs["default"], refs["fa-off"]):
            for x, y in zip(r0, r1):
                if x[0] != y[0]:
                    break
                same.append(abs(x[1] - y[1]))
        rows["llama.cpp -fa off (up to where the replies part)"] = summary(same)
        for v in a.variants.split(","):
            spec, _, src = v.partition("@")
            if src:
                out = work / "child.json"
                if not (Path(src) / "macaronic").is_dir():
                    raise SystemExit(f"{src}: not a source tree (DIR/src, holding macaronic/)")
                env = {**os.environ, "MACARONIC_SRC_TREE": str(Path(src).resolve())}
                subprocess.run([sys.executable, __file__, "--json", "-", "--threads", str(a.threads),
                                "--child", str(shared), spec, str(out)], check=True, env=env)
                d = json.loads(out.read_text())
            else:
                d = distances(ids, refs["default"], *spec.split(":"))
            rows[v] = summary(d)
            print(v, rows[v], flush=True)
    result = {"base": BASE, "prompts": a.prompts, "tokens": a.tokens, "threads": a.threads, "reference": "llama.cpp default",
              "rows": rows, "seconds": round(time.time() - t0), "at": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": "OMP_NUM_THREADS=2 .venv/bin/python scripts/llamacpp_logprobs.py " + " ".join(sys.argv[1:])}
    Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
