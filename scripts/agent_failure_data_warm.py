"""The agent warm-start experiments of 2026-12-04 (docs/LOG.md): evolve's failure-data skills for the
agent (N episodes each, generated worlds in no contract split: tests/contract/test_train_disjoint.py)
plus replayed agent-engine examples (the shipped agent's own data), shuffled, written to OUT.

First run (afternoon; it lost parallel-multiple calls): `--skills SIX --replay 1 --parallel-share 0`.
Second run (night): twice as many replayed as skill episodes, and the engine's parallel patterns
(`parallel`, `parallel_create`: several independent calls in one step) at a fixed share of the
replay, since every skill episode makes one call a step (parallel-multiple lost again).
Third run: the same with `calls_together` (independent calls made together) added to the skills.
SIX = fill_placeholders,state_facts,lookup_then_act,pick_tools,find_person,order_writes.

    .venv/bin/python scripts/agent_failure_data_warm.py runs/agent-warm2/data.jsonl --n 40 --replay 2 \\
      --parallel-share 0.25 --skills SIX
    .venv/bin/python scripts/agent_failure_data_warm.py runs/agent-warm3/data.jsonl --n 40 --replay 2 \\
      --parallel-share 0.25 --skills SIX,calls_together
    .venv/bin/macaronic train agent --data runs/agent-warmN/data.jsonl --base qwen2.5-coder-0.5b \\
      --out runs/agent-warmN/out --mode turn --rank 8 --steps 120 --batch 4 --lr 2e-4 --max-turn 512 \\
      --save-every 10 --threads 2 --autocast bfloat16 \\
      --init-adapter src/macaronic/specialists/qwen2.5-coder-0.5b/agent
"""

from __future__ import annotations

import argparse
import json
import random

from macaronic.evolve.failure_data import ROLE, SKILLS, examples
from macaronic.train.builders import build

PARALLEL = ("parallel", "parallel_create")
DEFAULT_SKILLS = [s for s in SKILLS if ROLE.get(s, "agent") == "agent" and s != "verb_to_write"]


def pattern(example: dict) -> str:
    parts = example["source"].split("/")  # engine/agent/<pattern>/<world>
    return parts[2] if len(parts) > 2 else parts[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=40, help="episodes per failure-data skill")
    ap.add_argument("--replay", type=float, default=1.0, help="replayed engine examples per skill episode")
    ap.add_argument("--parallel-share", type=float, default=0.0,
                    help="share of the replay drawn from the engine's parallel patterns (0: as drawn)")
    ap.add_argument("--skills", default=",".join(DEFAULT_SKILLS),
                    help="comma-separated failure-data skills (default: every agent skill but verb_to_write)")
    a = ap.parse_args()
    skills = a.skills.split(",")
    unknown = [s for s in skills if s not in SKILLS or ROLE.get(s, "agent") != "agent"]
    if unknown:
        ap.error(f"not agent skills: {unknown}; choose from {DEFAULT_SKILLS + ['verb_to_write']}")
    data = [e for s in skills for e in examples(s, a.n, 0)]
    replay = [e.to_dict() for e in build("agent_engine", 4000, 0, base="qwen2.5-coder-0.5b")]
    random.Random("replay:agent").shuffle(replay)
    k = round(len(data) * a.replay)
    if a.parallel_share > 0:
        par = [e for e in replay if pattern(e) in PARALLEL]
        rest = [e for e in replay if pattern(e) not in PARALLEL]
        n_par = min(len(par), round(k * a.parallel_share))
        chosen = par[:n_par] + rest[:k - n_par]
    else:
        chosen = replay[:k]
    rows = data + chosen
    random.Random(0).shuffle(rows)
    with open(a.out, "w") as f:
        f.writelines(json.dumps(e, sort_keys=True) + "\n" for e in rows)
    n_par = sum(pattern(e) in PARALLEL for e in chosen)
    print(f"{', '.join(skills)}: {len(data)} skill episodes + {len(chosen)} replayed ({n_par} parallel) -> {a.out}")


if __name__ == "__main__":
    main()
