"""The chat engine's rows that differ from the bare base's greedy reply (repaired, sampled at k>1)
plus the identity answers, as a `macaronic train chat --data` file (docs/LOG.md, 2026-12-05).

    .venv/bin/python scripts/chat_signal_data.py runs/chat-signal.jsonl
"""

from __future__ import annotations

import json
import sys

from macaronic.train.builders import chat_engine_examples
from macaronic.train.chat_rs import read, reselect


def main(out: str) -> None:
    rows = {r["prompt"]: r for r in reselect(read()) if r["reply"]}
    keep = []
    for e in chat_engine_examples(None):
        r = rows.get(e.messages[-2]["content"])
        if r is not None and (r["category"] == "identity" or r.get("repaired") or (r.get("k") or 0) > 0):
            keep.append(e.to_dict())
    with open(out, "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in keep)
    print(f"{len(keep)} examples -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
