"""The task-recipe selection: its selection sets are carved from training data, disjoint from what the models train
on; every model's command parses; the embedding-corpus recipe draws SST-2 sentences outside the bundled slice."""

from __future__ import annotations

import pytest

from compact_bert.cli import finetune_command
from compact_bert.finetuning import task_recipe
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.data import FinetuneDataArguments, load_finetuning_data, load_unlabeled_examples
from examples.embedding_data_kinds import CORPUS_SENTENCES, sst2_sentences, stsb_sentences, wikitext_sentences
from examples.task_recipes import (
    CHOSEN_RECIPE,
    CONLL_SELECTION,
    CONLL_TRAIN,
    DEFAULT_TASKS,
    RECIPES,
    STS_EQUIVALENT,
    STSB_SELECTION,
    STSB_TRAIN,
    TASKS,
    model_commands,
    task_files,
    unlabeled_files,
)
from examples.task_recipes import main as task_recipes_main
from tests.conftest import SHARED_DATA, needs_shared_data

needs_task_splits = needs_shared_data("stsb/train.tsv", "sst2/train.tsv", "conll2003/train.txt")


@needs_task_splits
def test_selection_sets_come_from_training_data_and_share_nothing_with_what_trains(tmp_path):
    files = task_files(SHARED_DATA, tmp_path)
    for task, (train, selection) in files.items():
        name = {"sst2": "sst2", "stsb": "stsb", "conll2003": "ner", "stsb-equivalence": "mrpc"}[task]
        splits = load_finetuning_data(
            FinetuneDataArguments(task_name=name, train_file=str(train), validation_file=str(selection))
        )
        columns = splits.text_columns
        trained = {tuple(str(row[column]) for column in columns) for row in splits.train}
        selected = [tuple(str(row[column]) for column in columns) for row in splits.validation]
        assert not trained & set(selected), task
        if task == "stsb":
            assert (len(splits.train), len(splits.validation)) == (STSB_TRAIN, STSB_SELECTION)
        if task == "conll2003":
            assert (len(splits.train), len(splits.validation)) == (CONLL_TRAIN, CONLL_SELECTION)
    train_rows = set((SHARED_DATA / "stsb" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:])
    assert set(files["stsb"][1].read_text(encoding="utf-8").splitlines()[1:]) <= train_rows  # all from train
    again = task_files(SHARED_DATA, tmp_path / "again")  # fixed seeds: the same sets every time
    assert all(again[task][1].read_bytes() == files[task][1].read_bytes() for task in files)


@needs_task_splits
def test_unlabeled_sets_come_from_training_data_outside_both_splits(tmp_path):
    """Each task's unlabeled examples load as ``--unlabeled_file`` reads them, hold no example of the training or
    the selection split (no sentence of a selection pair, no SST-2 phrase inside a selection sentence), and are
    the same every time."""
    files = task_files(SHARED_DATA, tmp_path)
    unlabeled = unlabeled_files(SHARED_DATA, tmp_path)
    sizes = {"sst2": 6000, "stsb": 1597, "conll2003": 7994}
    for task, path in unlabeled.items():
        name = {"sst2": "sst2", "stsb": "stsb", "conll2003": "ner"}[task]
        train, selection = files[task]
        arguments = FinetuneDataArguments(task_name=name, train_file=str(train), validation_file=str(selection))
        splits = load_finetuning_data(arguments)
        examples = load_unlabeled_examples(path, arguments, splits)
        assert len(examples) == sizes[task], task
        columns = splits.text_columns

        def texts(split, columns=columns):
            return {tuple(str(row[column]) for column in columns) for row in split}

        assert not texts(examples) & (texts(splits.train) | texts(splits.validation)), task
        if task == "stsb":
            selected = {row[column] for row in splits.validation for column in columns}
            assert not {row[column] for row in examples for column in columns} & selected
        if task == "sst2":
            sentences = "\n".join(splits.validation["sentence"])
            assert not any(row["sentence"] in sentences for row in examples)
    again = unlabeled_files(SHARED_DATA, tmp_path / "again")
    assert all(again[task].read_bytes() == unlabeled[task].read_bytes() for task in unlabeled)
    # the SST-2 set is bundled for the main job's tiny recipe: the package's copy is what this study writes
    assert bundled_sst2_files()["unlabeled"].read_bytes() == unlabeled["sst2"].read_bytes()


@needs_task_splits
def test_the_equivalence_task_is_the_stsb_pairs_labelled_by_their_score_and_has_no_dev_set(tmp_path):
    """The pair-classification check: STS-B's training and selection pairs, in order, "equivalent" exactly when
    scored STS_EQUIVALENT or more; it runs only when named, and --report_dev refuses it (no dev set)."""
    files = task_files(SHARED_DATA, tmp_path)
    for scored, labelled in zip(files["stsb"], files["stsb-equivalence"]):
        source = [row.split("\t") for row in scored.read_text(encoding="utf-8").splitlines()[1:]]
        rows = [row.split("\t") for row in labelled.read_text(encoding="utf-8").splitlines()[1:]]
        assert [row[:2] for row in rows] == [row[:2] for row in source]
        assert [row[2] for row in rows] == [str(int(float(row[2]) >= STS_EQUIVALENT)) for row in source]
        assert {"0", "1"} == {row[2] for row in rows}
    splits = load_finetuning_data(
        FinetuneDataArguments(task_name="mrpc", train_file=str(files["stsb-equivalence"][0]))
    )
    assert splits.task_type == "classification" and list(splits.label_names) == ["not_equivalent", "equivalent"]
    assert "stsb-equivalence" in TASKS and "stsb-equivalence" not in DEFAULT_TASKS
    with pytest.raises(SystemExit, match="--report_dev: stsb-equivalence has no dev set"):
        task_recipes_main(
            [
                "--output_dir",
                str(tmp_path),
                "--data_dir",
                str(SHARED_DATA),
                "--tasks",
                "stsb-equivalence",
                "--recipes",
                CHOSEN_RECIPE,
                "--report_dev",
            ]
        )


@needs_task_splits
def test_every_models_command_parses_as_finetune_flags(tmp_path):
    files = task_files(SHARED_DATA, tmp_path)
    (tmp_path / "conll2003" / "seed-0" / "teacher").mkdir(parents=True)
    commands = model_commands("conll2003", 0, files["conll2003"], tmp_path, list(RECIPES))
    assert list(commands) == ["teacher", "baseline", *(f"student: {name}" for name in RECIPES)]
    for command in commands.values():
        finetune_command.parse_finetune_arguments(command)
    student = commands["student: hidden"]
    assert student[student.index("--teacher") + 1] == str(tmp_path / "conll2003" / "seed-0" / "teacher")


@needs_task_splits
def test_the_chosen_candidate_is_what_finetune_teacher_does_by_default(tmp_path):
    """The candidate the selection chose and ``finetune --teacher``'s defaults (finetuning/task_recipe.py) are one
    recipe: the student's command parses to every constant of it."""
    files = task_files(SHARED_DATA, tmp_path)
    command = model_commands("stsb", 0, files["stsb"], tmp_path, [CHOSEN_RECIPE])[f"student: {CHOSEN_RECIPE}"]
    config = finetune_command.parse_finetune_arguments(command)[2]
    assert (config.learning_rate, config.augment_copies, config.augment_pair_sentences, config.augment_pair_swap) == (
        task_recipe.LEARNING_RATE,
        task_recipe.AUGMENT_COPIES,
        task_recipe.AUGMENT_PAIR_SENTENCES,
        task_recipe.AUGMENT_PAIR_SWAP,
    )
    # alpha unset: the recipe's by task kind, resolved once the data says which (finetune_command.finetune)
    assert (config.distillation_alpha, config.distillation_temperature) == (None, task_recipe.DISTILLATION_TEMPERATURE)
    # recombined pairs unset too: the recipe's for a sentence pair with a teacher, none for the other tasks
    assert config.augment_pair_recombined is None and task_recipe.AUGMENT_PAIR_RECOMBINED > 0
    assert [task_recipe.distillation_alpha(kind) for kind in ("classification", "regression", "ner")] == [
        task_recipe.DISTILLATION_ALPHA,
        task_recipe.REGRESSION_DISTILLATION_ALPHA,
        task_recipe.DISTILLATION_ALPHA,
    ]
    # a tiny student narrowed to at most three quarters of its teacher's channels (288 or 256 of 384): the soft
    # targets alone where the task has classes, the gold score on a regression; a wider one (320) the recipe's
    kinds = ("classification", "regression", "ner")
    narrow, regression = task_recipe.NARROWED_DISTILLATION_ALPHA, task_recipe.REGRESSION_DISTILLATION_ALPHA
    for channels in (288 / 384, 256 / 384):
        assert [task_recipe.distillation_alpha(kind, channels) for kind in kinds] == [narrow, regression, narrow]
    assert [task_recipe.distillation_alpha(kind, 320 / 384) for kind in kinds] == [
        task_recipe.DISTILLATION_ALPHA,
        regression,
        task_recipe.DISTILLATION_ALPHA,
    ]
    assert (
        config.distillation_hidden_weight,
        config.distillation_attention_weight,
        config.augment_word_neighbours,
    ) == (task_recipe.HIDDEN_WEIGHT, task_recipe.ATTENTION_WEIGHT, task_recipe.AUGMENT_WORD_NEIGHBOURS)


@needs_task_splits
def test_the_sst2_embedding_corpus_holds_no_sentence_of_the_bundled_slice(tmp_path):
    corpus = sst2_sentences(SHARED_DATA / "sst2" / "train.tsv", tmp_path / "sst2.txt")
    sentences = corpus.read_text(encoding="utf-8").splitlines()
    bundled = {line.split("\t")[0] for line in bundled_sst2_files()["train"].read_text(encoding="utf-8").splitlines()}
    assert len(sentences) == len(set(sentences)) == CORPUS_SENTENCES
    assert not set(sentences) & bundled and all(len(sentence.split()) >= 3 for sentence in sentences)


@needs_task_splits
def test_the_wikitext_and_stsb_embedding_corpora_are_what_they_say(tmp_path):
    wikitext = wikitext_sentences(SHARED_DATA / "wikitext2", tmp_path / "wikitext.txt").read_text(encoding="utf-8")
    sentences = wikitext.splitlines()
    assert len(sentences) == len(set(sentences)) == CORPUS_SENTENCES
    assert all(len(sentence.split()) >= 5 and not sentence.startswith("=") for sentence in sentences)
    assert "<unk>" not in wikitext and " @-@ " not in wikitext and "[UNK]" in wikitext
    assert wikitext == wikitext_sentences(SHARED_DATA / "wikitext2", tmp_path / "again.txt").read_text(
        encoding="utf-8"
    )
    stsb = stsb_sentences(SHARED_DATA / "stsb" / "train.tsv", tmp_path / "stsb.txt").read_text(encoding="utf-8")
    pairs = [
        line.split("\t") for line in (SHARED_DATA / "stsb" / "train.tsv").read_text(encoding="utf-8").splitlines()
    ]
    assert set(stsb.splitlines()) == {text.strip() for pair in pairs[1:] for text in pair[:2]}
