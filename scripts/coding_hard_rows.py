"""The coding adapter's "hard" RFT data: the rows of train/data/coding_rft.jsonl (macaronic train sample-coding)
whose problem's greedy reply failed, so only a sampled reply found it; the `coding_engine` generator's
examples of those rows (the coding head, shuffled by seed 0), written as {"messages": [...]} lines for
`macaronic train coding --data`. --rows N reads only the first N rows (the file only grows: rows are appended),
so a run on an earlier state of the file is rebuilt byte for byte.

    python scripts/coding_hard_rows.py runs/coding-hard.jsonl --rows 453    # the 145 rows of 2026-12-07
"""
import argparse
import json

from macaronic.train.builders import coding_engine_examples
from macaronic.train.rft import DATA, progress_path, read

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("out")
ap.add_argument("--rows", type=int, default=None, help="only the first N rows of coding_rft.jsonl (default all)")
a = ap.parse_args()
greedy = {}
for line in progress_path(DATA).read_text().splitlines():
    r = json.loads(line)
    greedy[r["id"]] = r["greedy_passed"]
examples = coding_engine_examples(None, 0, rows=[r for r in read()[:a.rows] if not greedy[r["id"]]])
with open(a.out, "w") as f:
    f.writelines(json.dumps({"messages": e.messages}) + "\n" for e in examples)
print(f"{a.out}: {len(examples)} rows")
