"""Model-card generation for compact-bert checkpoints."""
