"""compact-bert's jobs as library functions: typed arguments in, a typed result (or run summary) out, no command line.

Each ``compact-bert`` command parses its flags into a job's arguments once and calls the job; Python code calls the
job directly (README, "Jobs in Python"):

- ``distill_task.distill_task(TaskDistillationSpec(...)) -> TaskDistillationResult``: the main job (``distill task``);
- ``finetune.finetune(model_args, data_args, training_args)``: fine-tuning, and task distillation with a teacher
  (``finetune``);
- ``distill_minimoe.distill_minimoe(student, corpus, training, labels)``: relation distillation (``distill minimoe``);
- ``distill_embeddings.distill_embeddings(student, training)``: embedding distillation (``distill embeddings``);
- ``distill_tcd.distill_tcd(student, corpus, training)``: transfer-capability distillation (``distill tcd``);
- ``distill_mobilebert.distill_mobilebert(student, corpus, training)``: MobileBERT transfer (``distill mobilebert``);
- ``pretrain.pretrain(model, corpus, training)``: MLM (+ NSP) pre-training (``pretrain``).
"""
