"""compact-bert's jobs as library functions: typed arguments in, a typed result (or summary) out, no command line.

Each ``compact-bert`` command parses its flags into a job's arguments and calls the job; Python code calls the job
directly:

- ``compact_bert.jobs.finetune.finetune(model_args, data_args, training_args)``: fine-tuning, and task distillation
  with a teacher (``compact-bert finetune``).
"""
