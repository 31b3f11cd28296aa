"""Self-distillation data for moving a specialist to the assistant header (docs/LOG.md 2026-12-07,
twentieth session): the requests of a fresh draw of its data engine, answered by the shipped adapter
as served (the user-header layout with its role instruction, its grammar, greedy), written as
training examples whose target is that answer. Trained with `macaronic train ROLE --activation
assistant` (which drops the role's instruction, as an assistant-header adapter is served), the
successor learns the new switch-on point on its parent's own behaviour, not on new targets.

    MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 .venv/bin/python scripts/genui_self_distill.py \\
        genui_engine_compose 160 11 runs/distill/genui.jsonl
"""

from __future__ import annotations

import asyncio
import json
import sys
import time


def main(generator: str, n: int, seed: int, out: str, role: str = "genui") -> None:
    import torch

    from macaronic.engine.llm import load_default_llm
    from macaronic.serve.mol import HarnessConfig, MoL
    from macaronic.train.builders import build

    torch.set_num_threads(2)
    examples = build(generator, n, seed)
    requests = [[m for m in ex.messages if m["role"] != "system"][:-1] for ex in examples]  # up to the reply
    llm = load_default_llm()
    mol = MoL.from_llm(llm, config=HarnessConfig(summaries=False))
    t0 = time.time()

    async def run():
        sem = asyncio.Semaphore(16)

        async def one(msgs):
            async with sem:
                return await mol.aturn(msgs, model=role, sampling={"temperature": 0.0, "max_tokens": 768})
        return await asyncio.gather(*(one(r) for r in requests))

    results = asyncio.run(run())
    kept = 0
    with open(out, "w") as f:
        for ex, req, r in zip(examples, requests, results):
            if r.finish_reason != "stop":
                continue  # a card cut at the cap is not a target
            head = [m for m in ex.messages if m["role"] == "system"]
            f.write(json.dumps({"messages": [*head, *req, {"role": "assistant", "content": r.text}],
                                "role": role, "source": f"self-distill:{generator}:{seed}"}) + "\n")
            kept += 1
    print(f"{kept} of {len(examples)} answers kept ({time.time() - t0:.0f} s) -> {out}")
    llm.close()


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *(sys.argv[5:6]))
