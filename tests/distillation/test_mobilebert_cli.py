"""`compact-bert distill mobilebert` end to end: 2-process accelerate (gloo) and bad flags. A SIGKILL inside a stage
and the resume that finishes it with every stage's length kept: ``tests/reliability/test_bitwise_resume.py``."""

from __future__ import annotations

import json

import pytest
import transformers

from compact_bert.modeling import CompactMobileBertForPreTraining, IBBertForPreTraining
from tests.distillation.cli_helpers import (
    QUICK_DATA,
    QUIET,
    refusal_in_this_process,
    run_cli,
)
from tests.distillation.helpers import tiny_ib_bert_config, tiny_mobilebert_config

STUDENT = json.dumps(
    {
        key: value
        for key, value in tiny_mobilebert_config().to_diff_dict().items()
        if key not in ("model_type", "transformers_version")
    }
)


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("teacher")
    IBBertForPreTraining(tiny_ib_bert_config()).save_pretrained(folder)
    return folder


def _distill_arguments(teacher_dir, output_dir, max_steps: int, steps_per_stage: int) -> list[str]:
    return [
        "distill",
        "mobilebert",
        "--teacher",
        str(teacher_dir),
        "--student_overrides",
        STUDENT,
        "--strategy",
        "pkt",
        "--output_dir",
        str(output_dir),
        "--max_steps",
        str(max_steps),
        "--steps_per_stage",
        str(steps_per_stage),
        "--per_device_train_batch_size",
        "8",
        "--logging_steps",
        "1",
        *QUICK_DATA,
        *QUIET,
    ]


def test_two_process_accelerate_run_trains_saves_and_loads(tmp_path, teacher_dir):
    output = tmp_path / "student"
    run_cli([*_distill_arguments(teacher_dir, output, 6, 2), "--save_steps", "3"], processes=2)
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["optimizer_steps"] == 6
    model = transformers.AutoModelForPreTraining.from_pretrained(output)
    assert isinstance(model, CompactMobileBertForPreTraining)
    assert (output / "tokenizer.json").is_file() and (output / "loss_terms.png").is_file()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--strategy", "xkt"], "strategy"),
        (["--student_overrides", "[1, 2]"], "must be a JSON object"),
        (["--student_overrides", '{"num_attention_heads": 5}'], "intra_bottleneck_size"),
        (["--block_size", "4096"], "max_position_embeddings"),
    ],
)
def test_bad_arguments_fail_before_training(tmp_path, teacher_dir, arguments, message):
    base = [
        "distill",
        "mobilebert",
        "--teacher",
        str(teacher_dir),
        "--output_dir",
        str(tmp_path),
        "--max_steps",
        "2",
        "--student_overrides",
        STUDENT,
        *QUICK_DATA,
        *QUIET,
    ]
    for flag_index in range(0, len(arguments), 2):
        if arguments[flag_index] in base:
            position = base.index(arguments[flag_index])
            del base[position : position + 2]
    assert message in refusal_in_this_process(base + arguments)
    assert not list(tmp_path.glob("checkpoint-*"))


def test_missing_teacher_folder(tmp_path):
    arguments = ["distill", "mobilebert", "--teacher", str(tmp_path / "nope"), "--output_dir", str(tmp_path)]
    assert "is not a model folder" in refusal_in_this_process([*arguments, "--max_steps", "2"])
