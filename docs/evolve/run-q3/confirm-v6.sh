#!/bin/sh
# run-q3's second accepted successor (generation 12, GenUI) against its parent (generation 1) on
# contract v6: v5's families, graders and caps with fresh test instances (seed 6006). From the
# repository root, after the workdir exists (docs/evolve/README.md); rerun to resume.
D=runs/evolve-q2-repro
mkdir -p $D/confirm-v6
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} eval --pair $D/gen-012/cand-01/pair.json \
    --parent $D/gen-001/cand-03/pair.json --contract contracts/macaronic-core-v6.yaml --json $D/confirm-v6/eval.json \
    --audit $D/confirm-v6/audit.jsonl --lineage $D/confirm-v6/lineage.sqlite --reuse-unreached --workers 16 --quiet
