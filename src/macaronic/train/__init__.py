"""Post-training for specialists: data builders (`builders`), example encoding with the
current-turn loss mask (`examples`), LoRA SFT in `turn` or `full` mode with DDP (`sft`), GRPO
with verifiable rewards (`grpo`), the adapter directory with provenance (`output`) and the CLI
(`cli`). Knows nothing about serving or routing."""
