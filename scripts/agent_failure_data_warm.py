"""The agent warm-start experiment of 2026-12-04 (docs/LOG.md): evolve's failure-data skills for the
agent (40 episodes each, generated worlds in no contract split: tests/contract/test_train_disjoint.py)
plus as many replayed agent-engine examples (the shipped agent's own data), shuffled, written to OUT.

    .venv/bin/python scripts/agent_failure_data_warm.py runs/agent-warm/data.jsonl 40
    .venv/bin/macaronic train agent --data runs/agent-warm/data.jsonl --base qwen2.5-coder-0.5b \\
      --out runs/agent-warm/out --mode turn --rank 8 --steps 100 --batch 4 --lr 2e-4 --max-turn 512 \\
      --save-every 10 --threads 2 --autocast bfloat16 \\
      --init-adapter src/macaronic/specialists/qwen2.5-coder-0.5b/agent
"""

from __future__ import annotations

import json
import random
import sys

from macaronic.evolve.failure_data import ROLE, SKILLS, examples
from macaronic.train.builders import build


def main(out: str, n: int = 40) -> None:
    skills = [s for s in SKILLS if ROLE.get(s, "agent") == "agent" and s != "verb_to_write"]
    data = [e for s in skills for e in examples(s, n, 0)]
    replay = [e.to_dict() for e in build("agent_engine", 4000, 0, base="qwen2.5-coder-0.5b")]
    random.Random("replay:agent").shuffle(replay)
    rows = data + replay[:len(data)]
    random.Random(0).shuffle(rows)
    with open(out, "w") as f:
        f.writelines(json.dumps(e, sort_keys=True) + "\n" for e in rows)
    print(f"{', '.join(skills)}: {len(data)} skill episodes + {len(data)} replayed -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
