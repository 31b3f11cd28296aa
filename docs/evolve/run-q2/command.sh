#!/bin/sh
# The committed run on the default base (docs/evolve/README.md), from the repository root; rerun to resume.
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} evolve --contract contracts/macaronic-core-v5.yaml --generations 9 \
    --workdir runs/evolve-q2 --reference --operators prompt,failure_data,rft --collect agent \
    --budget dev_per_family=3,dev_per_family.agent=4,dev_per_family.genui=2,dev_per_family.mixed=2,candidates=5,parents=2,screen_confidence=90,rft_steps=20,workers=16,per_family=3
