"""The tiny-student study: every model's command parses as ``finetune`` flags with the shape, teacher and start its
candidate declares; the assistant trains before the first student it teaches; the chosen shape is the one
``--max_latency_ratio 0.3`` builds; the tables and the plot are drawn from recorded numbers."""

from __future__ import annotations

import json
import re

import pytest

from compact_bert.cli import finetune_command
from compact_bert.configuration import preset_config
from compact_bert.finetuning.depth_budget import UNLABELED_NARROWED_WIDTHS, DepthChoice, narrowed_shapes
from compact_bert.finetuning.task_recipe import (
    DISTILLATION_ALPHA,
    NARROWED_DISTILLATION_ALPHA,
    NARROWED_STUDENT_EPOCHS,
    UNLABELED_STUDENT_EPOCHS,
    distillation_alpha,
)
from examples.task_recipes import _summarize, task_files, unlabeled_files
from examples.tiny_students import (
    CANDIDATES,
    CHOSEN,
    CHOSEN_WITH_UNLABELED,
    FALLBACK,
    NO_DISTILLATION_BAR,
    SHAPES,
    _eager_ratio,
    _training_order,
    dev_roles,
    main,
    plot,
    role_commands,
)
from tests.conftest import SHARED_DATA, needs_shared_data

needs_task_splits = needs_shared_data("stsb/train.tsv", "sst2/train.tsv", "conll2003/train.txt")


def _lever(extra: list[str], flag: str, recipe_value: float) -> float:
    """The value a candidate's extra flags set for ``flag``, else the recipe's."""
    return float(extra[extra.index(flag) + 1]) if flag in extra else recipe_value


@needs_task_splits
def test_every_candidates_command_parses_with_its_shape_teacher_and_start(tmp_path):
    files = task_files(SHARED_DATA, tmp_path)
    unlabeled = unlabeled_files(SHARED_DATA, tmp_path)
    commands = role_commands("stsb", 1, files["stsb"], tmp_path, list(CANDIDATES), unlabeled["stsb"])
    assert list(commands) == ["teacher", "assistant", *CANDIDATES]
    base = tmp_path / "stsb" / "seed-1"
    for role, command in commands.items():
        model_args, data_args, config = finetune_command.parse_finetune_arguments(command)
        assert (config.seed, data_args.validation_file) == (1, str(files["stsb"][1])), role
        if role not in CANDIDATES:
            continue
        shape, taught_by, extra = CANDIDATES[role]
        preset, overrides = SHAPES[shape]
        assert (model_args.model_name_or_path, model_args.model_overrides) == (preset, overrides), role
        assert model_args.teacher == (None if taught_by is None else str(base / taught_by)), role
        if taught_by is None:  # cut from the pretrained teacher, labels at the teacher's learning rate
            assert model_args.init_from_teacher.endswith("model") and config.learning_rate == 1e-4
        else:  # the task-distillation recipe's learning rate (replacing the labels-only one) unless a lever sets it
            assert config.learning_rate == _lever(extra, "--learning_rate", 2e-4), role
            assert config.augment_copies == _lever(extra, "--augment_copies", 4), role
        assert config.num_train_epochs == _lever(extra, "--num_train_epochs", 3.0), role
    assert finetune_command.parse_finetune_arguments(commands["dense 2l-384h hidden"])[2].distillation_hidden_weight
    assert commands["assistant"][commands["assistant"].index("--output_dir") + 1] == str(base / "assistant")
    # on a regression a soft-targets candidate is its ten-epochs twin's run (the recipe keeps the gold score there);
    # on a task with classes it is its own run, on the soft targets alone
    conll = role_commands("conll2003", 1, files["conll2003"], tmp_path, list(CANDIDATES), unlabeled["conll2003"])
    for name in (
        "dense 3l-288h ten-epochs soft-targets",
        "dense 3l-320h ten-epochs soft-targets",
        "dense 3l-256h-512f unlabeled soft-targets",
    ):
        assert commands[name] == commands[name.removesuffix(" soft-targets")], name
        assert finetune_command.parse_finetune_arguments(commands[name])[2].distillation_alpha is None, name
        assert finetune_command.parse_finetune_arguments(conll[name])[2].distillation_alpha == 0.0, name
        assert conll[name][conll[name].index("--output_dir") + 1].endswith(name.replace(" ", "-")), name
    # the transfer set of real text: each task's own unlabeled examples in place of the copies
    for task, task_commands in (("stsb", commands), ("conll2003", conll)):
        config = finetune_command.parse_finetune_arguments(task_commands["dense 3l-256h-512f unlabeled"])[2]
        assert (config.unlabeled_file, config.augment_copies) == (str(unlabeled[task]), 0), task


def test_the_assistant_trains_just_before_the_first_student_it_teaches():
    assert _training_order(["dense 2l-384h", "minimoe 2l-384h"]) == ["teacher", "dense 2l-384h", "minimoe 2l-384h"]
    order = _training_order(["dense 2l-384h", "dense 2l-384h assistant", "minimoe 2l-384h assistant"])
    assert order == ["teacher", "dense 2l-384h", "assistant", "dense 2l-384h assistant", "minimoe 2l-384h assistant"]


def test_the_dev_read_scores_the_teacher_and_the_reported_candidates_named():
    """By default ``--report_dev`` reads the teacher, the no-distillation bar, CHOSEN and FALLBACK; a candidate chosen
    later is read alone (with its teacher) by naming it, so that the others are not read again."""
    assert dev_roles(list(CANDIDATES)) == ["teacher", NO_DISTILLATION_BAR, CHOSEN, FALLBACK, CHOSEN_WITH_UNLABELED]
    assert dev_roles([FALLBACK]) == ["teacher", FALLBACK]
    assert dev_roles(["dense 2l-384h"]) == ["teacher"]


@needs_task_splits
@pytest.mark.parametrize("report", ["--report_latency", "--report_dev"])
def test_a_report_on_models_not_trained_names_the_missing_folder(tmp_path, report):
    """Reading the latency or the dev scores of models that were never trained stops before loading anything, with
    the folder and the way to train it — not inside ``from_pretrained``, which takes a missing path for a Hub name. The
    teacher trained, the candidate missing: the candidate's folder is named; the assistant, which this candidate does
    not need, is not asked for."""
    argv = ["--output_dir", str(tmp_path), "--data_dir", str(SHARED_DATA), "--seeds", "0", "--tasks", "sst2"]
    argv += ["--candidates", FALLBACK, report]
    teacher = tmp_path / "sst2" / "seed-0" / "teacher"
    teacher.mkdir(parents=True)
    (teacher / "run_summary.json").write_text("{}")
    missing = tmp_path / "sst2" / "seed-0" / FALLBACK.replace(" ", "-")
    message = f"{FALLBACK!r} has no trained model at {missing}: run the study without"
    with pytest.raises(SystemExit, match=re.escape(message)):
        main(argv)


def test_the_chosen_shape_is_what_the_latency_budget_builds_for_the_main_jobs_preset():
    """CHOSEN's shape is the first ``--max_latency_ratio`` times, FALLBACK's the next (built where CHOSEN's does not
    fit), then the study's 288-channel shape, and the no-distillation bar's the narrowest: the narrowed shapes of the
    main job's preset, in order."""
    preset, overrides = SHAPES[CANDIDATES[CHOSEN][0]]
    wide, smaller_ffn, middle, narrow = narrowed_shapes(preset_config(preset))
    assert overrides == DepthChoice(3, 0.3, 1.0, narrowed=wide).overrides()
    assert SHAPES[CANDIDATES[FALLBACK][0]] == (preset, DepthChoice(3, 0.3, 1.0, narrowed=smaller_ffn).overrides())
    assert SHAPES["3l-288h"] == (preset, DepthChoice(3, 0.3, 1.0, narrowed=middle).overrides())
    assert overrides == {
        "num_hidden_layers": 3,
        "hidden_size": 320,
        "num_attention_heads": 10,
        "intermediate_size": 640,
    }
    bar_preset, bar_overrides = SHAPES[CANDIDATES[NO_DISTILLATION_BAR][0]]
    assert (bar_preset, bar_overrides) == (preset, DepthChoice(3, 0.3, 1.0, narrowed=narrow).overrides())
    # the recipe --max_latency_ratio trains it with; the no-distillation bar: the same epochs, on the labels alone
    _, taught_by, flags = CANDIDATES[CHOSEN]
    assert (taught_by, flags) == ("teacher", ["--num_train_epochs", f"{NARROWED_STUDENT_EPOCHS:g}"])
    assert CANDIDATES[NO_DISTILLATION_BAR][1:] == (None, flags)
    # both 320-channel shapes keep the recipe's weight of the labels (the study's default, as no flag sets it); the
    # 288-channel one the soft targets alone: what task_recipe.distillation_alpha gives each width on a task with
    # classes
    assert CANDIDATES[FALLBACK] == ("3l-320h-448f", "teacher", flags)
    soft_targets = ["--distillation_alpha", f"{NARROWED_DISTILLATION_ALPHA:g}"]
    assert CANDIDATES["dense 3l-288h ten-epochs soft-targets"] == ("3l-288h", "teacher", [*flags, *soft_targets])
    for name in (CHOSEN, FALLBACK):
        channels = SHAPES[CANDIDATES[name][0]][1]["hidden_size"] / 384
        assert (
            distillation_alpha("classification", channels) == DISTILLATION_ALPHA == distillation_alpha("ner", channels)
        )
    assert distillation_alpha("ner", middle["hidden_size"] / 384) == NARROWED_DISTILLATION_ALPHA
    # where unlabeled text is at hand: the one width the budget times for it, over that text, its epochs, the soft
    # targets alone (what task_recipe.distillation_alpha gives 256 of 384 channels on a task with classes)
    shape, taught_by, flags = CANDIDATES[CHOSEN_WITH_UNLABELED]
    (width,) = narrowed_shapes(preset_config(preset), UNLABELED_NARROWED_WIDTHS)
    assert SHAPES[shape] == (preset, DepthChoice(3, 0.3, 1.0, narrowed=width).overrides())
    epochs = flags[flags.index("--num_train_epochs") + 1]
    assert (taught_by, float(epochs), flags[flags.index("--augment_copies") + 1]) == (
        "teacher",
        UNLABELED_STUDENT_EPOCHS,
        "0",
    )
    alpha = float(flags[flags.index("--distillation_alpha") + 1])
    assert alpha == distillation_alpha("ner", width["hidden_size"] / 384) == NARROWED_DISTILLATION_ALPHA
    moe = preset_config(SHAPES["moe-2l-384h"][0], **SHAPES["moe-2l-384h"][1])
    # the MoE twin of the 2-layer student: the same attention, 4 experts holding its 768 FFN neurons, one per token
    assert (moe.num_hidden_layers, moe.hidden_size, moe.num_experts * moe.moe_intermediate_size) == (2, 384, 768)


def test_the_selection_table_and_the_plot_come_from_the_recorded_numbers(tmp_path):
    scores = {"sst2": {"teacher": {0: 0.9, 1: 0.8}, CHOSEN: {0: 0.855, 1: 0.76}, "minimoe 2l-384h": {0: 0.81}}}
    costs = {"sst2": {role: {0: 60.0, 1: 120.0} for role in scores["sst2"]}}
    table = _summarize(scores, "Selection sets", costs)
    assert f"| sst2 | {CHOSEN} | 85.5, 76.0 | 80.8 | 9.5 | 95.0% | 1.5 |" in table
    assert "- minimoe 2l-384h: 95.3% (worst 95.3%)" in table
    scores["sst2"][NO_DISTILLATION_BAR] = {0: 0.8}  # not timed: drawn at the latency of its shape's candidate
    latency = {
        CHOSEN: {"eager_ratio": 0.29},
        "dense 3l-256h": {"eager_ratio": 0.28},
        "minimoe 2l-384h": {"eager_ratio": 0.29},
    }
    assert _eager_ratio(NO_DISTILLATION_BAR, latency) == 0.28  # the 256-channel shape's, timed as `dense 3l-256h`
    assert _eager_ratio(CHOSEN, latency) == 0.29 and _eager_ratio("dense 1l-384h", latency) is None
    plot(scores, latency, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps(latency)  # what --report_latency writes is plain JSON
