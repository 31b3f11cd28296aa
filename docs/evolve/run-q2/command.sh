#!/bin/sh
# The committed run on the default base (docs/evolve/README.md), from the repository root; rerun to resume.
# Its last step: generations 1-5 ran with --generations 5 --operators prompt,failure_data (no per_family=3),
# generations 6-8 the same with --generations 8; this line added generation 9 (README: three lines in turn).
OMP_NUM_THREADS=2 MACARONIC_DTYPE=bfloat16 ${PY:-macaronic} evolve --contract contracts/macaronic-core-v5.yaml --generations 9 \
    --workdir runs/evolve-q2 --reference --operators prompt,failure_data,rft --collect agent \
    --budget dev_per_family=3,dev_per_family.agent=4,dev_per_family.genui=2,dev_per_family.mixed=2,candidates=5,parents=2,screen_confidence=90,rft_steps=20,workers=16,per_family=3
