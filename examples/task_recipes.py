"""Which task-distillation recipe holds across task kinds — chosen on sets carved from *training* data.

The main job's student (the 3-layer MiniLM that starts from its fine-tuned teacher's layers 1, 3, 5) and its recipe
must keep its teacher's quality on every kind of task, not only on one of them. This recipe trains,
for each task kind the shared data holds and each seed, the teacher, the layer-dropped baseline and one student per
candidate recipe, all with the main job's settings (3 epochs, batch 32, learning rate 1e-4, length-grouped batches,
one evaluation of the final model), and scores them on a **selection set** drawn from the task's training data and
never trained on:

- ``sst2`` (single sentence, accuracy): the bundled 3,000-sentence slice; selection: the 872 GLUE SST-2 train
  sentences of ``examples/student_selection.py`` (8 words or more, not in the slice);
- ``stsb`` (sentence pairs, regression, Spearman; a cross-encoder): 3,000 STS-B train pairs; selection: 1,000 other
  train pairs (a fixed shuffle of train's distinct pairs: selection first, then training);
- ``conll2003`` (tagging, entity F1): the first 4,000 CoNLL-2003 train sentences (the slice of
  ``examples/student_results.py``); selection: 1,000 of the train sentences after them (none repeating a sentence
  of the first 4,000).

Candidates (``RECIPES``) differ only in the student's ``compact-bert finetune --teacher`` flags: ``current`` (the
baseline recipe: 2 copies perturbing both sentences of a pair), ``hidden`` (plus intermediate-layer
distillation), ``one-of-pair`` (copies that keep one sentence of a pair whole), ``hidden-one-of-pair`` (both),
``hidden-no-copies``; then, one lever at a time on ``one-of-pair``: ``four-copies-one-of-pair`` (a transfer set of
4 copies), ``neighbours-one-of-pair`` (words replaced by teacher-embedding neighbours), ``six-epochs-one-of-pair``,
``first-and-last-layers-one-of-pair`` (the student starts from teacher layers 0, 2, 5),
``attention-hidden-one-of-pair`` (the attention loss beside the hidden states) and
``hidden-six-epochs-one-of-pair`` (the two best on STS-B together); then, one setting at a time on
``four-copies-one-of-pair``: ``soft-targets-only`` (alpha 0), ``double-learning-rate`` (the student at 2e-4, the
learning-rate study's choice) and ``quadruple-learning-rate`` (4e-4); ``hidden-double-learning-rate`` (that choice
with the hidden states, measured on STS-B); ``six-epochs-double-learning-rate`` (2 copies for 6 epochs
at 2e-4: 1.2 times the steps of 4 copies for 3 epochs) and ``swapped-pairs-double-learning-rate`` (each copy of a
pair also in the other order with probability 1/2), ``three-quarters-labels-double-learning-rate`` (α 0.75),
``labels-only-on-originals-double-learning-rate`` (α 1: the gold labels alone on the training examples, the teacher
on the copies; for a regression the teacher's "soft target" is one number, no dark knowledge) and
``labels-for-regression`` (α 1 for a regression only); then, one lever at a time on it, on STS-B:
``hidden-labels-for-regression``, ``six-epochs-labels-for-regression``, ``eight-copies-labels-for-regression`` and
``recombined-pairs-labels-for-regression`` (2 new pairs per training pair made of whole training sentences,
``--augment_pair_recombined``), and ``recombined-pairs``, which gives them to sentence pairs only (the choice:
``CHOSEN_RECIPE``). The recipe with the best mean share of its teacher over the task kinds (``--seeds`` averaged)
becomes ``finetune --teacher``'s default (``finetuning/task_recipe.py``; measured: docs/students.md).
Then, and only then, ``--report_dev`` scores the saved teacher, baseline and the *default* recipe's student on each
task's official dev set (GLUE SST-2 dev, STS-B dev, CoNLL-2003 validation) — the numbers of docs/students.md.

Every finished run leaves its ``run_summary.json`` and is not repeated when the recipe is run again; the teacher's
logits are cached in ``<output_dir>/cache``. Outcome: ``selection.json`` / ``dev.json`` and the tables printed.

Run: ``python -m examples.task_recipes --output_dir runs/task_recipes --seeds 0 1`` (on 2 CPU cores, per seed: about
12 minutes for the teachers and baselines of the three tasks, then 10 minutes per recipe of 2 copies, 16 of 4, 14
of 2 with the hidden-state loss); ``--recipes four-copies-one-of-pair`` trains one candidate only; then ``...
--report_dev``. Needs ``sst2/``, ``stsb/`` and ``conll2003/`` under ``--data_dir`` (the shared data beside a
checkout).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
from pathlib import Path

from compact_bert.cli import finetune_command
from compact_bert.distillation.teachers import resolve_model_path
from compact_bert.finetuning.bundled_data import bundled_sst2_files

from .comparison_flags import COMPARISON_TRAINING_FLAGS, baseline_arguments
from .downstream import DEFAULT_DATA_DIR
from .student_selection import write_selection_set

__all__ = [
    "CHOSEN_RECIPE",
    "RECIPES",
    "TASKS",
    "main",
    "unlabeled_files",
    "write_conll_split",
    "write_conll_unlabeled",
    "write_equivalence_split",
    "write_sst2_unlabeled",
    "write_stsb_split",
    "write_stsb_unlabeled",
]

TEACHER = "all-MiniLM-L6-v2"
SPLIT_SEED = 37
STSB_SELECTION, STSB_TRAIN = 1000, 3000
CONLL_TRAIN, CONLL_SELECTION = 4000, 1000
# Twice the bundled SST-2 slice's rows, as CoNLL-2003 has about twice its slice's sentences left over.
SST2_UNLABELED_ROWS, SST2_UNLABELED_SEED = 6000, 1804

# The main job's training settings (its comparison's flags without the task's own), without reporting.
TRAINING_FLAGS = [*COMPARISON_TRAINING_FLAGS, "--report_to", "none", "--disable_tqdm", "true"]
# task -> (dev metric key, task flags, dev file relative to --data_dir)
TASKS = {
    "sst2": ("eval_accuracy", ["--task_name", "sst2", "--max_seq_length", "64"], "sst2/validation.tsv"),
    "stsb": ("eval_spearmanr", ["--task_name", "stsb", "--max_seq_length", "128"], "stsb/validation.tsv"),
    "conll2003": ("eval_overall_f1", ["--task_name", "ner", "--max_seq_length", "128"], "conll2003/validation.txt"),
    # sentence-pair *classification*, which the shared data does not hold: STS-B's pairs, "equivalent" when scored
    # STS_EQUIVALENT or more. A check on the selection split only (no dev file): named with --tasks, never by default.
    "stsb-equivalence": ("eval_accuracy", ["--task_name", "mrpc", "--max_seq_length", "128"], None),
}
DEFAULT_TASKS = ("sst2", "stsb", "conll2003")
# "roughly equivalent, but some important information differs" on the STS scale: 52% of the training pairs
STS_EQUIVALENT = 3.0


def _student_flags(
    copies: int,
    hidden_weight: float,
    pair_sentences: str,
    neighbours: int = 0,
    attention_weight: float = 0,
    *extra: str,
    alpha: str | None = "0.5",
    recombined: str | None = "0",
) -> list[str]:
    """A candidate's ``finetune`` flags beyond the data and training settings ("{teacher}": the seed's teacher;
    ``extra``: flags that replace a shared training setting, e.g. the number of epochs). ``alpha``: the weight of
    the labels, the same on every task kind; ``None``: the recipe's by task kind
    (``finetuning/task_recipe.distillation_alpha``). ``recombined``: recombined pairs per training pair (none by
    default); ``None``: the recipe's, which sentence pairs alone get."""
    return [
        "--teacher",
        "{teacher}",
        *(["--distillation_alpha", alpha] if alpha is not None else []),
        *(["--augment_pair_recombined", recombined] if recombined is not None else []),
        "--augment_copies",
        str(copies),
        "--distillation_hidden_weight",
        str(hidden_weight),
        "--augment_pair_sentences",
        pair_sentences,
        "--augment_word_neighbours",
        str(neighbours),
        "--distillation_attention_weight",
        str(attention_weight),
        *extra,
    ]


# name -> the student's flags
RECIPES = {
    "current": _student_flags(copies=2, hidden_weight=0, pair_sentences="both"),  # the baseline recipe
    "one-of-pair": _student_flags(copies=2, hidden_weight=0, pair_sentences="one"),
    "hidden": _student_flags(copies=2, hidden_weight=1, pair_sentences="both"),
    "hidden-no-copies": _student_flags(copies=0, hidden_weight=1, pair_sentences="one"),
    "hidden-one-of-pair": _student_flags(copies=2, hidden_weight=1, pair_sentences="one"),
    "four-copies-one-of-pair": _student_flags(copies=4, hidden_weight=0, pair_sentences="one"),
    "neighbours-one-of-pair": _student_flags(copies=2, hidden_weight=0, pair_sentences="one", neighbours=15),
    "attention-hidden-one-of-pair": _student_flags(2, 1, "one", 0, 1),
    "six-epochs-one-of-pair": _student_flags(2, 0, "one", 0, 0, "--num_train_epochs", "6"),
    "first-and-last-layers-one-of-pair": _student_flags(2, 0, "one", 0, 0, "--layer_map", "0,2,5"),
    "hidden-six-epochs-one-of-pair": _student_flags(2, 1, "one", 0, 0, "--num_train_epochs", "6"),
    "soft-targets-only": _student_flags(4, 0, "one", 0, 0, "--distillation_alpha", "0"),
    "double-learning-rate": _student_flags(4, 0, "one", 0, 0, "--learning_rate", "2e-4"),
    "quadruple-learning-rate": _student_flags(4, 0, "one", 0, 0, "--learning_rate", "4e-4"),
    "hidden-double-learning-rate": _student_flags(4, 1, "one", 0, 0, "--learning_rate", "2e-4"),
    "six-epochs-double-learning-rate": _student_flags(
        2, 0, "one", 0, 0, "--learning_rate", "2e-4", "--num_train_epochs", "6"
    ),
    "swapped-pairs-double-learning-rate": _student_flags(
        4, 0, "one", 0, 0, "--learning_rate", "2e-4", "--augment_pair_swap", "true"
    ),
    "three-quarters-labels-double-learning-rate": _student_flags(
        4, 0, "one", 0, 0, "--learning_rate", "2e-4", "--distillation_alpha", "0.75"
    ),
    "labels-only-on-originals-double-learning-rate": _student_flags(
        4, 0, "one", 0, 0, "--learning_rate", "2e-4", "--distillation_alpha", "1"
    ),
    # alpha by task kind, 1 for a regression and 0.5 for the others: on STS-B the same computation as the candidate
    # above, on SST-2 and CoNLL-2003 as double-learning-rate
    "labels-for-regression": _student_flags(4, 0, "one", 0, 0, "--learning_rate", "2e-4", alpha=None),
    # one lever at a time on labels-for-regression, measured on STS-B: at alpha 1 the teacher speaks only on the
    # copies, one number each
    "hidden-labels-for-regression": _student_flags(4, 1, "one", 0, 0, "--learning_rate", "2e-4", alpha=None),
    "six-epochs-labels-for-regression": _student_flags(
        4, 0, "one", 0, 0, "--learning_rate", "2e-4", "--num_train_epochs", "6", alpha=None
    ),
    "eight-copies-labels-for-regression": _student_flags(8, 0, "one", 0, 0, "--learning_rate", "2e-4", alpha=None),
    # pairs of whole training sentences, each first sentence with its two lexical neighbours (sentence pairs only;
    # measured on STS-B, where the flag applies)
    "recombined-pairs-labels-for-regression": _student_flags(
        4, 0, "one", 0, 0, "--learning_rate", "2e-4", alpha=None, recombined="2"
    ),
    # the recipe's recombined pairs (2 per pair), which only sentence pairs get: on STS-B the same computation as the
    # candidate above, on SST-2 and CoNLL-2003 as labels-for-regression
    "recombined-pairs": _student_flags(4, 0, "one", 0, 0, "--learning_rate", "2e-4", alpha=None, recombined=None),
}
# The candidate the selection chose: finetuning/task_recipe.py holds its settings.
CHOSEN_RECIPE = "recombined-pairs"


def write_stsb_split(train_tsv: Path, folder: Path) -> tuple[Path, Path]:
    """``STSB_TRAIN`` training pairs and ``STSB_SELECTION`` selection pairs of STS-B train, disjoint, as
    ``sentence1<TAB>sentence2<TAB>score`` files (rows copied verbatim: quotes stay quotes). STS-B train repeats some
    pairs: each sentence pair is kept once (its first row), so that no selection pair is also trained on."""
    header, rows = _distinct_stsb_rows(train_tsv)
    folder.mkdir(parents=True, exist_ok=True)
    selection, train = folder / "stsb-selection.tsv", folder / "stsb-train.tsv"
    selection.write_text("\n".join([header, *rows[:STSB_SELECTION]]) + "\n", encoding="utf-8")
    train.write_text("\n".join([header, *rows[STSB_SELECTION : STSB_SELECTION + STSB_TRAIN]]) + "\n", encoding="utf-8")
    return train, selection


def write_equivalence_split(stsb_files: tuple[Path, Path], folder: Path) -> tuple[Path, Path]:
    """The STS-B training and selection pairs as a pair-classification task: label 1 ("equivalent") for a score of
    ``STS_EQUIVALENT`` or more, 0 below (``sentence1<TAB>sentence2<TAB>label`` files, the pairs of ``stsb_files``)."""
    written = []
    for source in stsb_files:
        _, *rows = source.read_text(encoding="utf-8").splitlines()
        target = folder / source.name.replace("stsb-", "stsb-equivalence-")
        lines = []
        for row in rows:
            first, second, score = row.split("\t")
            lines.append(f"{first}\t{second}\t{int(float(score) >= STS_EQUIVALENT)}")
        target.write_text("\n".join(["sentence1\tsentence2\tlabel", *lines]) + "\n", encoding="utf-8")
        written.append(target)
    return written[0], written[1]


def write_conll_split(train_txt: Path, folder: Path) -> tuple[Path, Path]:
    """The first ``CONLL_TRAIN`` sentences of CoNLL-2003 train, and ``CONLL_SELECTION`` sentences drawn with a fixed
    seed from the rest, as CoNLL files. CoNLL-2003 repeats short sentences (table rows, scores): a sentence whose
    words are in the training part is never drawn, nor drawn twice."""
    sentences = [block for block in train_txt.read_text(encoding="utf-8").split("\n\n") if block.strip()]

    def words(block: str) -> tuple[str, ...]:
        return tuple(line.split()[0] for line in block.splitlines() if line.strip())

    trained = {words(block) for block in sentences[:CONLL_TRAIN]}
    rest = list({words(block): block for block in reversed(sentences[CONLL_TRAIN:])}.values())[::-1]
    rest = [block for block in rest if words(block) not in trained]
    chosen = sorted(random.Random(SPLIT_SEED).sample(range(len(rest)), CONLL_SELECTION))
    folder.mkdir(parents=True, exist_ok=True)
    train, selection = folder / "conll-train.txt", folder / "conll-selection.txt"
    train.write_text("\n\n".join(sentences[:CONLL_TRAIN]) + "\n", encoding="utf-8")
    selection.write_text("\n\n".join(rest[index] for index in chosen) + "\n", encoding="utf-8")
    return train, selection


def _distinct_stsb_rows(train_tsv: Path) -> tuple[str, list[str]]:
    """STS-B train's header and its distinct pairs (each pair's first row) in ``write_stsb_split``'s fixed shuffle."""
    header, *rows = train_tsv.read_text(encoding="utf-8").splitlines()
    rows = list({tuple(row.split("\t")[:2]): row for row in reversed(rows)}.values())[::-1]
    random.Random(SPLIT_SEED).shuffle(rows)
    return header, rows


def write_sst2_unlabeled(glue_train: Path, bundled_train: Path, selection: Path, folder: Path) -> Path:
    """``SST2_UNLABELED_ROWS`` GLUE SST-2 train sentences without their labels (``sentence``, gzip-compressed with a
    fixed header, so the bytes are the same on every run), drawn uniformly with a fixed seed and kept in their order
    from the rows outside the bundled slice and the selection set whose text is neither part of a selection sentence
    nor contains one: the treebank's rows are phrases of its sentences, and a phrase of a selection sentence would
    show the student, through the teacher, what it is scored on."""
    rows = glue_train.read_text(encoding="utf-8").splitlines()[1:]
    taken = set(bundled_train.read_text(encoding="utf-8").splitlines()[1:])
    selected = [row.split("\t")[0] for row in selection.read_text(encoding="utf-8").splitlines()[1:]]
    joined = "\n".join(selected)
    pool = [
        index
        for index, row in enumerate(rows)
        if row not in taken
        and (text := row.split("\t")[0]) not in joined
        and not any(sentence in text for sentence in selected)
    ]
    chosen = sorted(random.Random(SST2_UNLABELED_SEED).sample(pool, SST2_UNLABELED_ROWS))
    text = "sentence\n" + "".join(rows[index].split("\t")[0] + "\n" for index in chosen)
    path = folder / "sst2-unlabeled.tsv.gz"
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return path


def write_stsb_unlabeled(train_tsv: Path, folder: Path) -> Path:
    """The STS-B train pairs that ``write_stsb_split`` leaves out of both splits, without their scores
    (``sentence1<TAB>sentence2``), except those sharing a sentence with a selection pair."""
    _, rows = _distinct_stsb_rows(train_tsv)
    selected = {sentence for row in rows[:STSB_SELECTION] for sentence in row.split("\t")[:2]}
    rest = [row.split("\t")[:2] for row in rows[STSB_SELECTION + STSB_TRAIN :]]
    kept = [pair for pair in rest if not selected.intersection(pair)]
    path = folder / "stsb-unlabeled.tsv"
    path.write_text("sentence1\tsentence2\n" + "".join("\t".join(pair) + "\n" for pair in kept), encoding="utf-8")
    return path


def write_conll_unlabeled(train_txt: Path, selection: Path, folder: Path) -> Path:
    """The CoNLL-2003 train sentences after the training slice, each once, whose words are neither a training nor a
    selection sentence's, as words without tags (one per line, a blank line between sentences)."""
    sentences = [block for block in train_txt.read_text(encoding="utf-8").split("\n\n") if block.strip()]

    def words(block: str) -> tuple[str, ...]:
        return tuple(line.split()[0] for line in block.splitlines() if line.strip())

    blocks = [block for block in selection.read_text(encoding="utf-8").split("\n\n") if block.strip()]
    seen = {words(block) for block in sentences[:CONLL_TRAIN]} | {words(block) for block in blocks}
    kept = []
    for block in sentences[CONLL_TRAIN:]:
        if words(block) not in seen:
            seen.add(words(block))
            kept.append("\n".join(words(block)))
    path = folder / "conll-unlabeled.txt"
    path.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return path


def unlabeled_files(data_dir: Path, output: Path) -> dict[str, Path]:
    """Each task's in-domain examples without labels, outside its training and selection splits (``task_files``,
    written too): SST-2 sentences drawn from those left over by the bundled slice and the selection set (twice the
    slice's rows), and the STS-B pairs and CoNLL-2003 sentences left over by the splits."""
    files, splits = task_files(data_dir, output), output / "splits"
    sst2 = (data_dir / "sst2/train.tsv", bundled_sst2_files()["train"], files["sst2"][1])
    return {
        "sst2": write_sst2_unlabeled(*sst2, splits),
        "stsb": write_stsb_unlabeled(data_dir / "stsb/train.tsv", splits),
        "conll2003": write_conll_unlabeled(data_dir / "conll2003/train.txt", files["conll2003"][1], splits),
    }


def task_files(data_dir: Path, output: Path) -> dict[str, tuple[Path, Path]]:
    """Each task's (training file, selection file)."""
    for needed in ("sst2/train.tsv", "stsb/train.tsv", "conll2003/train.txt"):
        if not (data_dir / needed).is_file():
            raise SystemExit(f"{data_dir / needed} is missing: the selection sets are drawn from it (--data_dir).")
    splits = output / "splits"
    sst2_train = bundled_sst2_files()["train"]
    return {
        "sst2": (
            sst2_train,
            write_selection_set(data_dir / "sst2/train.tsv", sst2_train, splits / "sst2-selection.tsv"),
        ),
        "stsb": write_stsb_split(data_dir / "stsb/train.tsv", splits),
        "conll2003": write_conll_split(data_dir / "conll2003/train.txt", splits),
    } | {"stsb-equivalence": write_equivalence_split(write_stsb_split(data_dir / "stsb/train.tsv", splits), splits)}


def _finetune(arguments: list[str]) -> dict:
    """One ``compact-bert finetune`` run, or the finished run's summary when its folder holds one."""
    output_dir = Path(arguments[arguments.index("--output_dir") + 1])
    if (output_dir / "run_summary.json").is_file():
        print(f"Reusing the finished run in {output_dir}")
        return json.loads((output_dir / "run_summary.json").read_text())
    print(f"\n=== compact-bert finetune {' '.join(arguments)}", flush=True)
    # An interrupted run of this recipe (checkpoints, no summary) is started over in its own folder.
    return finetune_command.finetune_from_flags([*arguments, "--overwrite_output_dir"])[0]


def model_commands(task: str, seed: int, files, output: Path, recipes: list[str]) -> dict[str, list[str]]:
    """The ``finetune`` command line of every model of one task and seed, by role."""
    train, selection = files
    base = output / task / f"seed-{seed}"
    shared = [
        *TASKS[task][1],
        "--train_file",
        str(train),
        "--validation_file",
        str(selection),
        *TRAINING_FLAGS,
        "--seed",
        str(seed),
        "--teacher_cache_dir",
        str(output / "cache"),
    ]
    pretrained = str(resolve_model_path(TEACHER))
    commands = {
        "teacher": ["--model_name_or_path", pretrained, "--output_dir", str(base / "teacher"), *shared],
        "baseline": [*baseline_arguments(pretrained, str(base / "baseline")), *shared],
    }
    for name in recipes:
        flags = [flag.replace("{teacher}", str(base / "teacher")) for flag in RECIPES[name]]
        commands[f"student: {name}"] = [
            "--model_name_or_path",
            "minilm-3l-384h",
            "--output_dir",
            str(base / f"student-{name}"),
            *shared,
            *flags,  # last: a recipe's flag overrides a shared one
        ]
    return commands


def evaluate_folder(folder: Path, task: str, train_file: Path, dev_file: Path) -> dict:
    """A saved classifier's metrics on ``dev_file``, computed as ``finetune`` computes them at the end of training."""
    from compact_bert.finetuning.data import FinetuneDataArguments
    from compact_bert.finetuning.folder_evaluation import evaluate_folder as evaluate

    flags = TASKS[task][1]
    data_args = FinetuneDataArguments(
        task_name=flags[1], train_file=str(train_file), validation_file=str(dev_file), max_seq_length=int(flags[3])
    )
    return evaluate(folder, data_args)


def like_for_like_latency(folders: dict[str, Path], task: str) -> dict[str, float]:
    """Median eager milliseconds of the task's teacher, baseline and student at batch 1 x 128, all on compact-bert's
    inference path (``optimize_for_inference``, as the main job times them), and of the teacher as transformers runs
    it (the reference row), interleaved in one process (``evaluation/runtime_latency.py``)."""
    import transformers

    from compact_bert.evaluation.runtime_latency import eager_runner, latency_inputs, measure_interleaved
    from compact_bert.jobs.task_comparison import LATENCY_ROUNDS, LATENCY_SEQUENCE_LENGTH

    auto_class = (
        transformers.AutoModelForTokenClassification
        if task == "conll2003"
        else transformers.AutoModelForSequenceClassification
    )
    models = {role: auto_class.from_pretrained(folder).eval() for role, folder in folders.items()}
    inputs = latency_inputs(models["teacher"].config.vocab_size, 1, LATENCY_SEQUENCE_LENGTH)
    runners = {role: eager_runner(model, inputs, optimize=True) for role, model in models.items()}
    reference = auto_class.from_pretrained(folders["teacher"]).eval()  # as transformers runs it: for reference
    runners["teacher (transformers)"] = eager_runner(reference, inputs, optimize=False)
    measured = measure_interleaved(runners, rounds=LATENCY_ROUNDS)
    return {role: round(result.median_ms, 2) for role, result in measured.items()}


def _record(path: Path, task: str, role: str, seed: int, value: float) -> None:
    """Add one score to ``path`` (every run of every invocation: a later run of other recipes adds to it)."""
    recorded = json.loads(path.read_text()) if path.is_file() else {}
    recorded.setdefault(task, {}).setdefault(role, {})[str(seed)] = value
    path.write_text(json.dumps(recorded, indent=2) + "\n")


def _summarize(results: dict, title: str, costs: dict | None = None) -> str:
    """One table: per task, each role's metric per seed, mean, spread and share of the teacher's mean; with
    ``costs`` (task -> role -> seed -> CPU seconds), each role's CPU-minutes per seed too. Then each role's mean share
    over the tasks, and its worst task."""
    header = "| task | model | per seed | mean | spread | of teacher |" + (" CPU-minutes per seed |" if costs else "")
    lines = [title, "", header, "|---" * header.count(" | ") + "|---|"]
    shares: dict[str, list[float]] = {}
    for task, roles in results.items():
        teacher = statistics.fmean(roles["teacher"].values())
        for role, per_seed in roles.items():
            values = list(per_seed.values())
            mean = statistics.fmean(values)
            spread = max(values) - min(values)
            shares.setdefault(role, []).append(mean / teacher)
            line = (
                f"| {task} | {role} | {', '.join(f'{100 * value:.1f}' for value in values)} | {100 * mean:.1f} | "
                f"{100 * spread:.1f} | {100 * mean / teacher:.1f}% |"
            )
            if costs:
                line += f" {statistics.fmean(costs[task][role].values()) / 60:.1f} |"
            lines.append(line)
    lines += ["", "Mean share of the teacher over the task kinds, and the worst task:"]
    lines += [
        f"- {role}: {100 * statistics.fmean(values):.1f}% (worst {100 * min(values):.1f}%)"
        for role, values in shares.items()
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="runs/task_recipes")
    parser.add_argument("--data_dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(DEFAULT_TASKS))
    parser.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument(
        "--report_dev",
        action="store_true",
        help="Score the saved teacher, baseline and the named recipe's student (--recipes, one) on the dev sets.",
    )
    args = parser.parse_args(argv)
    output, data_dir = Path(args.output_dir), Path(args.data_dir)
    files = task_files(data_dir, output)
    if args.report_dev and len(args.recipes) != 1:
        raise SystemExit("--report_dev scores one recipe's students: name it with --recipes.")
    if args.report_dev and any(TASKS[task][2] is None for task in args.tasks):
        raise SystemExit(f"--report_dev: {', '.join(t for t in args.tasks if TASKS[t][2] is None)} has no dev set.")
    results: dict[str, dict[str, dict[int, float]]] = {}
    for seed in args.seeds:
        for task in args.tasks:
            metric = TASKS[task][0]
            for role, command in model_commands(task, seed, files[task], output, args.recipes).items():
                summary = _finetune(command)
                if args.report_dev:
                    folder = Path(command[command.index("--output_dir") + 1])
                    scores = evaluate_folder(folder, task, files[task][0], data_dir / TASKS[task][2])
                    value = scores[metric]
                else:
                    value = summary[metric]
                results.setdefault(task, {}).setdefault(role, {})[seed] = value
                _record(output / ("dev.json" if args.report_dev else "selection.json"), task, role, seed, value)
    if args.report_dev:
        latency = {}
        for task in args.tasks:
            commands = model_commands(task, args.seeds[0], files[task], output, args.recipes)
            folders = {  # one recipe with --report_dev: one student
                "student" if role.startswith("student") else role: Path(command[command.index("--output_dir") + 1])
                for role, command in commands.items()
            }
            latency[task] = like_for_like_latency(folders, task)
            print(
                f"{task}: eager ms, compact-bert's path, batch 1 x 128: "
                + ", ".join(f"{role} {ms}" for role, ms in latency[task].items())
                + f"; student / teacher {latency[task]['student'] / latency[task]['teacher']:.2f}x"
            )
        (output / "dev_latency.json").write_text(json.dumps(latency, indent=2) + "\n")
    title = (
        f"Official dev sets, recipe {args.recipes[0]!r}, seeds {args.seeds}"
        if args.report_dev
        else f"Selection sets (carved from train), seeds {args.seeds}"
    )
    print("\n" + _summarize(results, title))


if __name__ == "__main__":
    main()
