#!/bin/sh
# run-q3's last champion (generation 12) against generation 0 on contract v6's fresh test instances:
# generation 12's rows come from confirm-v6.sh's log (--prior), generation 0 answers every task.
# From the repository root after confirm-v6.sh; rerun to resume.
D=runs/evolve-q2-repro
mkdir -p $D/confirm-v6-gen0
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} eval --pair $D/gen-012/cand-01/pair.json \
    --parent $D/gen-000/pair.json --contract contracts/macaronic-core-v6.yaml --json $D/confirm-v6-gen0/eval.json \
    --prior $D/confirm-v6/eval.json.tasks.jsonl --audit $D/confirm-v6/audit.jsonl \
    --lineage $D/confirm-v6-gen0/lineage.sqlite --workers 16 --quiet
# generation 1 against generation 0 from the rows the two runs above left (runs no task, 15 s)
mkdir -p $D/confirm-v6-gen1
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} eval --pair $D/gen-001/cand-03/pair.json \
    --parent $D/gen-000/pair.json --contract contracts/macaronic-core-v6.yaml --json $D/confirm-v6-gen1/eval.json \
    --prior $D/confirm-v6-gen0/eval.json.tasks.jsonl --audit $D/confirm-v6/audit.jsonl \
    --lineage $D/confirm-v6-gen1/lineage.sqlite --workers 16 --quiet
