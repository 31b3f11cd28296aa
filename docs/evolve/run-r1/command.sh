#!/bin/sh
# Issue 38's run of record (docs/evolve/README.md, "run-r1"): the default base, contract v7 (its test
# never read before this run), served experience from scripts/served_drive.py, operators only (no
# plan), from the repository root. One line; rerun it to resume (after a kill, or when --hours ran
# out: no generation starts after the budget, the one running finishes). HOURS sets the budget.
# The workdir's last checkpoint is committed in docs/evolve/run-r1/work/ (the sessions are 3 hours):
# where runs/evolve-r1 is missing, it is restored from there. Its pair manifests name files by
# absolute path (/work/main/...): resume from a checkout at that path.
[ -d runs/evolve-r1 ] || { mkdir -p runs && cp -r docs/evolve/run-r1/work runs/evolve-r1; }
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 MACARONIC_QUANT=int4 ${PY:-macaronic} evolve --contract contracts/macaronic-core-v7.yaml \
    --generations 12 --workdir runs/evolve-r1 --reference --experience docs/evolve/run-r1/served/experience.sqlite \
    --operators prompt,router_refit,failure_data,rft,data_engine --collect agent \
    --budget dev_per_family=3,dev_per_family.agent=8,dev_per_family.genui=2,dev_per_family.mixed=2,candidates=3,parents=2,screen_confidence=90,rft_steps=20,workers=16,per_family=3 \
    --hours "${HOURS:-2}"
