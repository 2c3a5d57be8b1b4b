"""The task-distillation recipe: what ``compact-bert finetune --teacher FOLDER`` does unless told otherwise, and
what the main job (``compact-bert distill task``) runs.

Chosen by its mean share of the teacher over three kinds of task — single sentences (SST-2), sentence pairs scored
by a cross-encoder (STS-B) and tagging (CoNLL-2003) — on selection sets carved from each task's *training* data,
never on the dev sets the project reports (``python -m examples.task_recipes``; the measurements and the runners-up:
docs/students.md, "One recipe across task kinds"):

- the labels and the teacher's soft targets, half and half, at temperature 2 (DistilBERT's), for sentence
  classification and tagging; for a regression the gold score alone on the training examples (alpha 1), the
  teacher's value on the copies: on STS-B alpha 1 gained 1.0 and 0.8 Spearman points over 0.5 on the two seeds,
  0.75 gained 0.5; the soft targets alone (alpha 0, at lr 1e-4) lost 1.7;
- four perturbed copies of every training example labelled by the teacher (Tang et al., 2019): on STS-B no copies
  lost 3.9 Spearman points against two; four against two gained 1.5 F1 on CoNLL-2003 and nothing on STS-B;
- in a sentence pair, one sentence of each copy perturbed and its partner kept whole: +1.2 to +2.5 points on STS-B
  against perturbing both;
- for a sentence pair, two more pairs per training pair made of whole training sentences, its first sentence with
  the two closest to it in words (Augmented SBERT's sampling, ``pair_recombination.py``), labelled by the teacher:
  on STS-B +2.3 and +2.0 Spearman points over the same recipe without them, where eight copies
  instead of four lost 0.3, six epochs gained 0.8 for 1.7x the time and the hidden states nothing;
- the student at twice its teacher's learning rate (2e-4 against the main job's 1e-4): on STS-B +1.8 Spearman points
  over 1e-4, and 4e-4 loses 0.9; CoNLL-2003 +0.5 F1, SST-2 unchanged; at 2e-4, six epochs on two copies gained 0.5
  on STS-B and copies of a pair in swapped order lost 1.2;
- no intermediate-layer loss: the hidden states (TinyBERT's task stage) gained on STS-B (+1.2) and lost on
  CoNLL-2003 (-0.6) with two copies, for about 1.5x the training time; with four copies and no hidden loss the mean
  share over the three tasks is the best measured (95.9% against 95.6%, within one seed's noise). The attention
  loss, word replacement by teacher-embedding neighbours, six epochs and another layer map were measured on STS-B
  and are not in the recipe (docs/students.md).
"""

from __future__ import annotations

__all__ = [
    "TRAINING_SETTINGS",
    "AUGMENT_COPIES",
    "AUGMENT_PAIR_RECOMBINED",
    "AUGMENT_PAIR_SENTENCES",
    "AUGMENT_PAIR_SWAP",
    "AUGMENT_WORD_NEIGHBOURS",
    "ATTENTION_WEIGHT",
    "DISTILLATION_ALPHA",
    "NARROWED_DISTILLATION_ALPHA",
    "REGRESSION_DISTILLATION_ALPHA",
    "SOFT_TARGETS_ALONE_MAX_CHANNELS",
    "DISTILLATION_TEMPERATURE",
    "HIDDEN_WEIGHT",
    "LEARNING_RATE",
    "NARROWED_STUDENT_EPOCHS",
    "UNLABELED_STUDENT_EPOCHS",
    "distillation_alpha",
    "narrowed_student_epochs",
    "student_augment_copies",
]

# The student's peak learning rate: twice the 1e-4 its teacher is fine-tuned with in the main job (a student that
# starts from every other layer of its teacher has further to move, and soft targets are a smoother signal).
LEARNING_RATE = 2e-4
# How the student trains — the settings every measurement of the recipe used, which ``finetune --teacher`` takes
# unless a flag says otherwise and the main job's student takes as they are: 3 epochs at batch 32 with the recipe's
# learning rate, batches of sentences of similar length (half the padding), the final model evaluated once (no
# checkpoint is selected on the dev set).
TRAINING_SETTINGS = {
    "num_train_epochs": 3.0,
    "learning_rate": LEARNING_RATE,
    "per_device_train_batch_size": 32,
    "group_by_length": True,
    "eval_strategy": "no",
    "save_strategy": "no",
    "load_best_model_at_end": False,
}
# The epochs of a tiny student — the narrowed shape ``--max_latency_ratio`` builds where no whole student half the
# teacher's depth fits (``depth_budget.narrowed_shapes``: a sixth or a third of the residual channels and heads, and
# part of each FFN, cut away) — and of the labels-only baseline of its shape: they relearn to use what was kept. At
# 0.3x of the packaged teacher, the 256-channel shape on CoNLL-2003's selection sets kept 92.6% of the teacher with
# 3 epochs (seed 0), 94.1% with 6 and 95.1% with 10 (seeds 0 and 1); 4e-4 instead of 2e-4, 8 copies instead of 4 or
# the hidden states added nothing beyond 6 epochs (seed 0). 10 epochs kept 95.4% of SST-2 and 96.6% of STS-B
# (``examples/tiny_students.py``; docs/students.md, "Tiny students").
NARROWED_STUDENT_EPOCHS = 10.0
# The epochs of a tiny student that learns from in-domain text without labels (``--unlabeled_file``; the main job's
# bundled SST-2 sentences) instead of perturbed copies: about as many examples seen as 10 epochs of the slice and 4
# copies, where the unlabeled text is twice the slice (``examples/tiny_students.py``, the "unlabeled" candidates).
UNLABELED_STUDENT_EPOCHS = 15.0
# Weight of the hard labels; the teacher's soft targets get 1 - alpha (sentence classification and tagging).
DISTILLATION_ALPHA = 0.5
# The same for a narrowed tiny student (``NARROWED_STUDENT_EPOCHS``) that keeps at most
# ``SOFT_TARGETS_ALONE_MAX_CHANNELS`` of its teacher's residual channels: the teacher's soft targets alone. On the
# selection sets, two seeds (``examples/tiny_students.py``, the "soft-targets" candidates; docs/students.md), the
# 288-channel student of a 384-channel teacher kept 95.4% of it on CoNLL-2003 and on SST-2 with them against 94.8%
# and 95.0% at 0.5, ahead in all four seed-task pairs (256 channels, seed 0: 95.6% against 95.2% on CoNLL-2003); the
# 320-channel student kept 96.6% and 94.6% against 96.7% and 95.2%, behind in three pairs. Every difference is within
# a seed's spread: a choice made on the selection sets, each width by its own numbers, not a law.
NARROWED_DISTILLATION_ALPHA = 0.0
# The widest share of the teacher's channels (288 of 384) at which a narrowed student takes the soft targets alone.
SOFT_TARGETS_ALONE_MAX_CHANNELS = 0.75
# The same for a regression: the gold score alone on the training examples, the teacher's value on the copies. A
# regression teacher's "soft target" is one number, its guess at the label: no distribution over classes to pass on.
REGRESSION_DISTILLATION_ALPHA = 1.0
# Softmax temperature of the soft targets (DistilBERT's 2).
DISTILLATION_TEMPERATURE = 2.0
# Perturbed copies of every training example (sentence, pair or tagged sentence), labelled by the teacher.
AUGMENT_COPIES = 4
# Sentence pairs: perturb "one" sentence of each copy and keep its partner whole ("both": perturb each).
AUGMENT_PAIR_SENTENCES = "one"
# Sentence pairs: each copy also trades its two sentences' places with probability 1/2.
AUGMENT_PAIR_SWAP = False
# Sentence pairs: new pairs per training pair, its first sentence with its lexical neighbours among the training
# sentences, labelled by the teacher (finetuning/pair_recombination.py; 0: none). Sentence pairs only.
AUGMENT_PAIR_RECOMBINED = 2
# Candidates per word for word replacement in the copies (finetuning/word_neighbours.py; 0: masking and n-grams only).
AUGMENT_WORD_NEIGHBOURS = 0
# Weight of the intermediate-layer loss (finetuning/intermediate_distillation.py).
HIDDEN_WEIGHT = 0.0
# Weight of the attention loss (finetuning/intermediate_distillation.py).
ATTENTION_WEIGHT = 0.0


def distillation_alpha(task_type: str, narrowed_channels: float | None = None) -> float:
    """The recipe's weight of the hard labels for a task of ``task_type`` ("classification", "regression", "ner").
    ``narrowed_channels``: a narrowed tiny student's share of its teacher's residual channels (``None`` for any other
    student). A regression keeps the gold score either way: its teacher's "soft target" is one guess at the label."""
    if task_type == "regression":
        return REGRESSION_DISTILLATION_ALPHA
    if narrowed_channels is not None and narrowed_channels <= SOFT_TARGETS_ALONE_MAX_CHANNELS:
        return NARROWED_DISTILLATION_ALPHA
    return DISTILLATION_ALPHA


def narrowed_student_epochs(over_unlabeled_text: bool) -> float:
    """The epochs of a narrowed tiny student and of its labels-only baseline: ``UNLABELED_STUDENT_EPOCHS`` where the
    student learns from in-domain text without labels, else ``NARROWED_STUDENT_EPOCHS`` (over perturbed copies)."""
    return UNLABELED_STUDENT_EPOCHS if over_unlabeled_text else NARROWED_STUDENT_EPOCHS


def student_augment_copies(narrowed_over_unlabeled_text: bool) -> int:
    """The perturbed copies the teacher labels for its student: ``AUGMENT_COPIES``, none for a narrowed tiny student
    that learns from in-domain text without labels (that text is its transfer set)."""
    return 0 if narrowed_over_unlabeled_text else AUGMENT_COPIES
