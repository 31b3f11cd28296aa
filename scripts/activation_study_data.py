"""The data of the activation study on the default base (docs/LOG.md 2026-12-07, nineteenth session):
one draw of a generator's examples written twice, as the served harness renders them for each rule.

- `user` (the shipped rule): the header, the role's instruction, the user turn, the reply.
- `assistant`: the same without the role's instruction (`builders.at_answer`, what `macaronic train
  --activation assistant` does to its data). An adapter that switches on at the assistant header gets
  no instruction before the user turn (`HarnessBundle.served(..., assistant_roles)`), so the user turn
  is the bare base's in every role: one prefill that any specialist continues and the router can read.

    .venv/bin/python scripts/activation_study_data.py genui_engine_compose 160 7 runs/act-qwen
    # -> runs/act-qwen/user.jsonl, runs/act-qwen/assistant.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from macaronic.train.builders import at_answer, build


def main(generator: str, n: int, seed: int, out: str) -> None:
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
