"""The agent warm start of 2026-12-05 (docs/LOG.md, issue 36): the function-tool engine's examples
(`macaronic.datagen.functions`: calculators and converters; a call when a listed tool computes what
is asked, none when only its neighbours are listed) plus rows replayed from the shipped agent's own
training file, shuffled, written to OUT. Both render under the shipped harness bundle and its
compact tool listing: the shipped agent's data (sha256 179a762f…, its manifest) rebuilds with the
commands below (tests/train/test_agent_data.py). Under a bundle with `"tool_listing": "typed"` and
`--fractions 0.5` (the engine's percent-as-fraction tools) they render sha256 ce3a27b4…, the
typed-listing run of 2026-12-05's fourth session, not shipped (docs/LOG.md).

    .venv/bin/python scripts/agent_failure_data_warm.py runs/agent-fn/warm3.jsonl --n 40 --replay 2 \\
      --parallel-share 0.25 --skills fill_placeholders,state_facts,lookup_then_act,pick_tools,find_person,order_writes,calls_together
    .venv/bin/python scripts/agent_functions_warm.py runs/agent-fn/data.jsonl --functions 240 \\
      --replay-file runs/agent-fn/warm3.jsonl --replay 240
    .venv/bin/macaronic train agent --data runs/agent-fn/data.jsonl --base qwen2.5-coder-0.5b \\
      --out runs/agent-fn/out --mode turn --rank 8 --steps 120 --batch 4 --lr 2e-4 --max-turn 512 \\
      --save-every 10 --threads 2 --autocast bfloat16 --seed 0 \\
      --init-adapter src/macaronic/specialists/qwen2.5-coder-0.5b/agent
"""

from __future__ import annotations

import argparse
import json
import random

from macaronic.datagen.functions import examples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--functions", type=int, default=240, help="function-tool examples")
    ap.add_argument("--seed", type=int, default=0, help="the function-tool engine's seed")
    ap.add_argument("--fractions", type=float, default=0.0,
                    help="share of tools with a percentage parameter that take it as a decimal fraction "
                         "(0: the shipped agent's data; the typed-listing run used 0.5)")
    ap.add_argument("--replay-file", required=True, help="JSONL the replayed rows are drawn from (the shipped agent's data)")
    ap.add_argument("--replay", type=int, default=240, help="rows drawn from --replay-file (seeded)")
    a = ap.parse_args()
    with open(a.replay_file) as f:
        replay = [json.loads(line) for line in f if line.strip()]
    if a.replay > len(replay):
        ap.error(f"--replay {a.replay}: {a.replay_file} holds {len(replay)} rows")
    random.Random("replay:functions").shuffle(replay)
    rows = [e.to_dict() for e in examples(a.functions, a.seed, a.fractions)] + replay[:a.replay]
    random.Random(0).shuffle(rows)
    with open(a.out, "w") as f:
        f.writelines(json.dumps(e, sort_keys=True) + "\n" for e in rows)
    print(f"{a.functions} function-tool examples + {a.replay} replayed from {a.replay_file} -> {a.out}")


if __name__ == "__main__":
    main()
