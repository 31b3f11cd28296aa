"""Copy an evolve workdir into the repository as a checkpoint a later session restores (a session lasts
3 hours; `docs/evolve/run-r1/command.sh` copies the committed checkpoint back where the workdir is
missing). Stop the run first (kill its process group): the copy is of files at rest.

The lineage's write-ahead log is folded into `lineage.sqlite` first. Left out: adapter weights and
training checkpoints (docs/ holds no weights), locks, SQLite's side files. A candidate not yet screened
whose pair.json names adapter weights the copy leaves out loses that pair.json too: restored, `evolve`
then rebuilds it (its training from step 0) instead of screening a pair whose files are missing. A
screened one keeps it: its verdict is in the lineage, and a rerun reads that instead of screening again.

    .venv/bin/python scripts/evolve_checkpoint.py runs/evolve-r1 docs/evolve/run-r1/work
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
from pathlib import Path

SKIP = ("*.ckpt", "*.tmp", "reference.lock", "*-shm", "*-wal", "*.safetensors", "*.pt")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("dest", type=Path)
    a = ap.parse_args()
    db = a.workdir / "lineage.sqlite"
    if not db.is_file():
        ap.error(f"{a.workdir} is not an evolve workdir (no lineage.sqlite)")
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        screened = {k for (k,) in c.execute("SELECT key FROM screens")}  # "gen-5:cand-01"
    c.close()
    if a.dest.exists():
        shutil.rmtree(a.dest)
    shutil.copytree(a.workdir, a.dest, ignore=shutil.ignore_patterns(*SKIP))
    dropped = []
    for pj in sorted(a.dest.glob("gen-*/cand-*/pair.json")):
        m = json.loads(pj.read_text())
        src = a.workdir / pj.parent.relative_to(a.dest)
        if f"gen-{int(pj.parent.parent.name.split('-')[1])}:{pj.parent.name}" in screened:
            continue
        for ad in m.get("adapters", {}).values():
            p = Path(ad["path"])
            inside = p.is_relative_to(src.resolve()) or p.is_relative_to(src)
            if inside and any(p.glob("*.safetensors")):
                pj.unlink()
                dropped.append(str(pj.parent.relative_to(a.dest)))
                break
    files = sum(1 for _ in a.dest.rglob("*"))
    print(f"checkpoint {a.dest}: {files} files; rebuilt on restore: {', '.join(dropped) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
