#!/bin/sh
# run-q2's accepted successor (generation 1) against generation 0 on contract v6: v5's families, graders
# and caps with fresh instances (seed 6006) that no one had read (docs/evolve/README.md). From the
# repository root after command.sh; rerun to resume.
D=runs/evolve-q2
mkdir -p $D/confirm-v6
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} eval --pair $D/gen-001/cand-03/pair.json \
    --parent $D/gen-000/pair.json --contract contracts/macaronic-core-v6.yaml --json $D/confirm-v6/eval.json \
    --audit $D/confirm-v6/audit.jsonl --lineage $D/confirm-v6/lineage.sqlite --reuse-unreached --workers 16 --quiet
