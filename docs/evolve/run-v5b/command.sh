#!/bin/sh
# The committed run (docs/evolve/README.md), from the repository root; rerun to resume.
OMP_NUM_THREADS=1 nice -n 5 ${PY:-macaronic} evolve --contract contracts/macaronic-core-v5.yaml --generations 5 \
    --workdir runs/evolve-v5b --reference --operators prompt,rft --collect coding,chat \
    --budget per_family=2,samples=4,temperature_pct=70,dev_per_family=6,dev_per_family.agent=2,dev_per_family.genui=1,dev_per_family.mixed=1,candidates=4,parents=2,screen_confidence=90,rft_steps=20,workers=8
