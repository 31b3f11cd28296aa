"""Chat adapters against the bare base on chat engine prompts no round trained on: a held-out seed of the
engine's stream (`datagen.chat.prompts`), each prompt whose text is in a committed round
(`train/data/chat_rs*.jsonl`) dropped. Every model answers greedily in its served layout (the bare base
as a role with no adapter is served: no chat instruction; an adapter switching on at the assistant
header: none either), one run, batched. Scored by the engine's own verifiers: all of a prompt's checks,
and per check kind (`answer`: the arithmetic and ordering puzzles' right value, `substance`: a reply
with content). Paired bootstrap against the base (`contract.stats.paired_bootstrap`).

The engine's prompts are templates: this measures what training did to the kind of request it trained
on, not a blind suite (the hand-written instruction sets are those). It is where a loss of the base's
reasoning shows: the first DPO adapter answered the arithmetic puzzles in a line and got them wrong.

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 OMP_NUM_THREADS=2 .venv/bin/python scripts/chat_heldout_compare.py \\
        --adapter dpo2=src/macaronic/specialists/qwen2.5-coder-0.5b/chat --adapter dpo3=runs/chat-dpo3 \\
        --seed 9 --n 400 --json docs/bench/external/chat-heldout-seed9.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", action="append", default=[], metavar="NAME=DIR", help="a chat adapter (repeatable)")
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=9, help="the engine's prompt seed (training used seed 0)")
    ap.add_argument("--n", type=int, default=400, help="prompts of that seed's stream")
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    import torch

    from macaronic.contract.stats import paired_bootstrap
    from macaronic.datagen.chat import prompts, verify
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.engine.sampling import SamplingParams
    from macaronic.harness import load_bundle
    from macaronic.prompts import first_turn
    from macaronic.train.chat_rs import DATA, read

    if a.seed == 0:
        ap.error("seed 0 is the stream every round trained on")
    trained = {r["prompt"] for f in DATA.parent.glob("chat_rs*.jsonl") for r in read(f)}
    ps = [p for p in prompts(a.n, a.seed) if p["category"] != "identity" and p["prompt"] not in trained]
    dropped = a.n - len(ps)
    torch.set_num_threads(a.threads)
    llm = load_llm(a.base, [], EngineConfig.from_env(max_batch=16))
    bundle = load_bundle()
    models = {"base": (None, bundle.served([], []))}
    for spec in a.adapter:
        name, _, path = spec.partition("=")
        if not path:
            ap.error(f"--adapter wants NAME=DIR, got {spec!r}")
        info = llm.add_adapter(path, name)
        models[name] = (name, bundle.served(["chat"], ["chat"] if info.activation == "assistant" else []))
    rows: dict[str, list[dict]] = {}
    t0 = time.time()
    for name, (adapter, layout) in models.items():
        hs = [llm.submit(llm.encode_chat(first_turn(layout, "chat", p["prompt"])), adapter,
                         SamplingParams(max_tokens=a.max_tokens, temperature=0.0)) for p in ps]
        out = []
        for p, h in zip(ps, hs):
            text, last = h.result()
            failed = verify(p, text) + (["complete"] if last.finish_reason == "length" else [])
            out.append({"id": p["id"], "category": p["category"], "failed": failed, "reply": text})
        rows[name] = out
        print(f"[heldout] {name}: {sum(not r['failed'] for r in out)}/{len(out)} pass, {time.time() - t0:.0f} s",
              file=sys.stderr, flush=True)
    llm.close()
    kinds = sorted({c[0] for p in ps for c in p["checks"]} | {"complete"})
    table = {}
    print(f"{len(ps)} prompts of seed {a.seed} ({dropped} identity or trained-on dropped)")
    print("| model | all checks | − base [95%] | answer | − base [95%] | substance | no_harness | cut at cap |")
    print("|---|---:|---|---:|---|---:|---:|---:|")
    for name, out in rows.items():
        ok = [float(not r["failed"]) for r in out]
        base_ok = [float(not r["failed"]) for r in rows["base"]]
        ans = [i for i, p in enumerate(ps) if any(c[0] == "answer" for c in p["checks"])]
        a_ok = [float("answer" not in out[i]["failed"]) for i in ans]
        a_base = [float("answer" not in rows["base"][i]["failed"]) for i in ans]
        per = {k: 1 - sum(k in r["failed"] for r in out) / max(1, sum(k == c[0] for p in ps for c in p["checks"]))
               for k in kinds if k != "complete"}
        cut = sum("complete" in r["failed"] for r in out)
        d, ci = paired_bootstrap(ok, base_ok)
        da, cia = paired_bootstrap(a_ok, a_base)
        table[name] = {"all": sum(ok) / len(ok), "all_vs_base": [d, ci], "answer_n": len(ans),
                       "answer": sum(a_ok) / max(1, len(a_ok)), "answer_vs_base": [da, cia], "kinds": per, "cut": cut,
                       "failed": dict(Counter(k for r in out for k in r["failed"]))}
        print(f"| {name} | {sum(ok) / len(ok):.3f} | {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] | {table[name]['answer']:.3f} "
              f"(n {len(ans)}) | {da:+.3f} [{cia[0]:+.3f}, {cia[1]:+.3f}] | {per.get('substance', 1):.3f} | "
              f"{per.get('no_harness', 1):.3f} | {cut} |")
    with open(a.json, "w") as f:
        json.dump({"command": " ".join(sys.argv), "seed": a.seed, "n": a.n, "prompts": len(ps), "dropped": dropped,
                   "max_tokens": a.max_tokens, "table": table,
                   "rows": {m: [{k: r[k] for k in ("id", "category", "failed", "reply")} for r in out]
                            for m, out in rows.items()}}, f, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
