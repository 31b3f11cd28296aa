"""Post-training for specialists: data builders (`builders`; the examples and their encoding with the
current-turn loss mask are datagen/examples.py), LoRA SFT in `turn` or `full` mode with DDP (`sft`),
GRPO with verifiable rewards (`grpo`, its prompts `rollouts`) and the adapter directory with
provenance (`output`); `macaronic train` is commands/train.py. Knows nothing about serving or routing."""
