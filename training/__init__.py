"""Training plumbing that distillation, fine-tuning and the CLI share: the one base trainer, run errors, guards,
checkpoints and run folders, atomic writes, version shims, checked loading and the concise console."""
