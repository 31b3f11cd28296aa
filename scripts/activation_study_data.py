"""The data of the activation study on the default base (docs/LOG.md 2026-12-07, nineteenth session):
one draw of a generator's examples written twice, as the served harness renders them for each rule.

- `user` (the shipped rule): the header, the role's instruction, the user turn, the reply.
- `assistant`: the same without the role's instruction (`builders.at_answer`, what `macaronic train
  --activation assistant` does to its data). An adapter that switches on at the assistant header gets
  no instruction before the user turn (`HarnessBundle.served(..., assistant_roles)`), so the user turn
  is the bare base's in every role: one prefill that any specialist continues and the router can read.

    .venv/bin/python scripts/activation_study_data.py genui_engine_compose 160 7 runs/act-qwen
    # -> runs/act-qwen/user.jsonl, runs/act-qwen/assistant.jsonl
    .venv/bin/python scripts/activation_study_data.py shipped:agent 160 7 runs/act-qwen-agent
    # shipped:ROLE: n rows drawn (seeded) from the data the default base's shipped ROLE adapter was trained on
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from macaronic.train.builders import at_answer, build


def main(generator: str, n: int, seed: int, out: str) -> None:
    if generator.startswith("shipped:"):
        import random

        from macaronic.datagen.examples import read_jsonl
        from macaronic.engine.adapters import recorded_data
        from macaronic.engine.llm import shipped_adapters_dir

        role = generator.split(":", 1)[1]
        path = recorded_data(shipped_adapters_dir() / role)
        if path is None:
            raise SystemExit(f"the shipped {role} adapter has no recorded data file; name its generator instead "
                             f"(its macaronic.json `data.source`)")
        rows = read_jsonl(path)
        if n > len(rows):
            raise SystemExit(f"the shipped {role} adapter was trained on {len(rows)} examples; ask for at most that many")
        examples = random.Random(seed).sample(rows, n)
    else:
        examples = build(generator, n, seed)
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "user.jsonl", "w") as u, open(d / "assistant.jsonl", "w") as a:
        for ex, at in zip(examples, at_answer(examples, "")):
            u.write(json.dumps(ex.to_dict()) + "\n")
            a.write(json.dumps(at.to_dict()) + "\n")
    print(f"wrote {len(examples)} examples of {generator} (seed {seed}) to {d}/user.jsonl and {d}/assistant.jsonl")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
