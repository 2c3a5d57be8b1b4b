"""Distillation methods of compact-bert as transformers Trainer subclasses."""
