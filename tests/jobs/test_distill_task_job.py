"""The main job as a Python call (``compact_bert.jobs.distill_task``) is the command: same settings, same weights and
numbers; the spec refuses bad values by name before anything runs."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from compact_bert.cli.main import main
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.task_recipe import (
    AUGMENT_COPIES,
    DISTILLATION_ALPHA,
    NARROWED_DISTILLATION_ALPHA,
    NARROWED_STUDENT_EPOCHS,
    UNLABELED_STUDENT_EPOCHS,
)
from compact_bert.jobs.distill_task import TaskDistillationResult, TaskDistillationSpec, _unlabeled_file, distill_task
from tests.conftest import fixed_clock

TINY_STUDENT = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
QUICK = {"max_train_samples": 32, "max_eval_samples": 32, "per_device_train_batch_size": 16, "num_train_epochs": 1}


def _digest(folder) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_the_python_job_and_the_command_give_the_same_weights_and_numbers(tmp_path):
    result = distill_task(
        TaskDistillationSpec(
            student_overrides=TINY_STUDENT, output_dir=str(tmp_path / "python"), export_onnx=False, **QUICK
        )
    )
    assert isinstance(result, TaskDistillationResult)
    flags = [item for name, value in QUICK.items() for item in (f"--{name}", str(value))]
    overrides = json.dumps(TINY_STUDENT)
    command = ["distill", "task", "--student_overrides", overrides, "--export_onnx", "false", *flags]
    assert main([*command, "--output_dir", str(tmp_path / "command")]) == 0
    summary = json.loads((tmp_path / "command" / "run_summary.json").read_text())
    assert summary["comparison"]["sst2_accuracy"] == result.accuracy
    for role in ("teacher-sst2", "baseline-sst2", "sst2"):
        assert _digest(tmp_path / f"python-{role}") == _digest(tmp_path / f"command-{role}"), role
    assert result.student_dir == (tmp_path / "python-sst2").resolve()
    # a student narrowed by --student_overrides (64 of 384 channels) takes the tiny-student recipe: soft targets alone
    student = json.loads((tmp_path / "python-sst2" / "run_summary.json").read_text())
    assert student["task_distillation"]["alpha"] == NARROWED_DISTILLATION_ALPHA
    assert set(result.share_of_teacher_kept) == {"baseline", "student"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"student_preset": "minilm-9l"}, "--student_preset 'minilm-9l' is unknown; valid presets: "),
        ({"student_overrides": "{not json"}, "--student_overrides"),
        ({"num_train_epochs": 0}, "--num_train_epochs must be > 0"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"max_steps": 0}, "--max_steps must be >= 1, or -1"),
        ({"augment_copies": -1}, "--augment_copies must be >= 0"),
        ({"train_file": "/nonexistent/train.tsv"}, "--train_file /nonexistent/train.tsv does not exist"),
    ],
)
def test_the_spec_refuses_a_bad_value_by_name(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        TaskDistillationSpec(**fields)


@pytest.mark.parametrize(
    ("wide_attention_units", "shape", "alpha"),
    [
        # the 640-neuron FFN is over 0.3 (the hosts where it measured 0.31-0.33x), the 448-neuron one fits: 320
        # channels, taught with the recipe's labels and soft targets half and half
        ((2.6, 2.2), ("bert", 3, 320, 10, 448), DISTILLATION_ALPHA),
        # both 320-channel shapes over 0.3: 288 channels, on the soft targets alone
        ((2.6, 2.6), ("bert", 3, 288, 9, 576), NARROWED_DISTILLATION_ALPHA),
    ],
)
def test_a_tiny_budget_ships_a_narrowed_three_layer_bert_and_a_baseline_of_its_shape(
    tmp_path, monkeypatch, wide_attention_units, shape, alpha
):
    """``distill task --max_latency_ratio 0.3`` with the packaged teacher: where no whole 3-layer student fits, the
    student and the labels-only baseline both get the first tiny-student shape that fits (3 layers of 320 channels
    and 10 heads with 640 FFN neurons, else 448; else 288 / 9 / 576), and the student ships as a plain BERT, trained
    with the tiny-student recipe of its width. The clock is fixed (teacher 8 units, a whole student 1 plus 1 a
    layer, the narrower shapes 2.2) so that the choice is the one the tiny-student study measured, on any
    machine."""

    def measure(runners, rounds=30, warmup=3):
        for run in runners.values():
            run()
        widest, smaller_ffn = wide_attention_units
        units = {"teacher": 8.0, "narrowed 0": widest, "narrowed 1": smaller_ffn, "narrowed 2": 2.2, "narrowed 3": 2.2}
        return {name: SimpleNamespace(median_ms=units[name] if name in units else 1.0 + name) for name in runners}

    fixed_clock(monkeypatch, measure)
    untimed = {name: value for name, value in QUICK.items() if name != "num_train_epochs"}
    # training data of the user's own, without unlabeled sentences: the tiny recipe over copies
    own = tmp_path / "train.tsv"
    own.write_bytes(bundled_sst2_files()["train"].read_bytes())
    result = distill_task(
        TaskDistillationSpec(
            output_dir=str(tmp_path / "tiny"), max_latency_ratio=0.3, export_onnx=False, train_file=str(own), **untimed
        )
    )
    record = result.summary["depth_by_latency_budget"]
    assert record["num_hidden_layers"] == 3 and record["narrowed_latency_ratio"] == 0.275
    folders = ("tiny-teacher-sst2", "tiny-baseline-sst2", "tiny-sst2")
    for role in folders[1:]:
        config = json.loads((tmp_path / role / "config.json").read_text())
        fields = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")
        assert tuple(config[name] for name in fields) == shape, role
    assert "auto_map" not in json.loads((tmp_path / "tiny-sst2" / "config.json").read_text())
    width = f"{shape[2]} channels, {shape[3]} heads and {shape[4]} FFN neurons"
    card = (tmp_path / "tiny-sst2" / "README.md").read_text(encoding="utf-8")
    assert f"fine-tuned from the preset `minilm-3l-384h` as 3 layers of {width}" in card
    # the student and its baseline say that the budget sized them; the teacher, which it did not, says nothing of it
    sized = (
        "Sized by `--max_latency_ratio 0.3`: timed against the teacher with random weights before training, this "
        f"shape ran at 0.275x its latency (teacher {record['teacher_ms']} ms"
    )
    cards = {role: (tmp_path / role / "README.md").read_text(encoding="utf-8") for role in folders}
    assert [sized in cards[role] for role in folders] == [False, True, True]
    # the tiny-student recipe's epochs for the narrowed student and its baseline; the teacher the recipe's 3
    epochs = {role: json.loads((tmp_path / role / "run_summary.json").read_text())["epoch"] for role in folders}
    narrowed = NARROWED_STUDENT_EPOCHS
    assert epochs == {"tiny-teacher-sst2": 3.0, "tiny-baseline-sst2": narrowed, "tiny-sst2": narrowed}
    student = json.loads((tmp_path / "tiny-sst2" / "run_summary.json").read_text())
    assert student["task_distillation"]["alpha"] == alpha
    assert (student["task_distillation"]["augment_copies"], student["task_distillation"]["unlabeled_examples"]) == (
        AUGMENT_COPIES,
        0,
    )
    assert result.summary["comparison"]["baseline"] == (
        f"the pretrained teacher's layers 1, 3, 5 (0-based), {width} each, fine-tuned on the labels"
    )


def test_with_unlabeled_sentences_a_tiny_budget_ships_the_256_channel_student_taught_over_them(tmp_path, monkeypatch):
    """``distill task --max_latency_ratio 0.3 --unlabeled_file``: where no whole 3-layer student fits, the one width
    for a student that learns from unlabeled text (3 layers of 256 channels, 8 heads, 512 FFN neurons) is timed and
    built, for the student and its labels-only baseline; the student learns over the slice and the unlabeled
    sentences without copies, on the soft targets alone, and both train the recipe's epochs for it (fixed clock, as
    above)."""

    def measure(runners, rounds=30, warmup=3):
        for run in runners.values():
            run()
        units = {"teacher": 8.0, "narrowed 0": 2.2}
        return {name: SimpleNamespace(median_ms=units[name] if name in units else 1.0 + name) for name in runners}

    fixed_clock(monkeypatch, measure)
    sentences = tmp_path / "unlabeled.tsv"
    rows = bundled_sst2_files()["validation"].read_text(encoding="utf-8").splitlines()[1:41]
    sentences.write_text("sentence\n" + "".join(row.split("\t")[0] + "\n" for row in rows), encoding="utf-8")
    untimed = {name: value for name, value in QUICK.items() if name != "num_train_epochs"}
    spec = TaskDistillationSpec(
        output_dir=str(tmp_path / "tiny"),
        max_latency_ratio=0.3,
        export_onnx=False,
        unlabeled_file=str(sentences),
        **untimed,
    )
    result = distill_task(spec)
    record = result.summary["depth_by_latency_budget"]
    assert record["narrowed"] == {"hidden_size": 256, "num_attention_heads": 8, "intermediate_size": 512}
    assert list(record["narrowed_latency_ratios"]) == ["3 layers of 256 channels, 8 heads and 512 FFN neurons"]
    for role in ("tiny-baseline-sst2", "tiny-sst2"):
        config = json.loads((tmp_path / role / "config.json").read_text())
        assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"]) == (3, 256, 512)
        assert json.loads((tmp_path / role / "run_summary.json").read_text())["epoch"] == UNLABELED_STUDENT_EPOCHS
    distillation = json.loads((tmp_path / "tiny-sst2" / "run_summary.json").read_text())["task_distillation"]
    assert (distillation["unlabeled_examples"], distillation["augment_copies"], distillation["alpha"]) == (
        40,
        0,
        NARROWED_DISTILLATION_ALPHA,
    )
    card = (tmp_path / "tiny-sst2" / "README.md").read_text(encoding="utf-8")
    over = "alone, over the training set and 40 unlabeled in-domain examples labelled by the teacher (`unlabeled.tsv`)"
    assert over in card


def test_the_bundled_unlabeled_sentences_teach_a_tiny_student_on_the_bundled_slice_only():
    """The default of ``--unlabeled_file``: the bundled sentences where a latency budget may narrow the student and
    the data is the bundled slice; none for the user's own data or without a budget (the main job's half-size
    student keeps its measured recipe); what the user gives, always."""
    bundled = str(bundled_sst2_files()["unlabeled"])
    assert _unlabeled_file(TaskDistillationSpec(max_latency_ratio=0.3)) == bundled
    assert _unlabeled_file(TaskDistillationSpec()) is None
    own = bundled_sst2_files()["train"]
    assert _unlabeled_file(TaskDistillationSpec(max_latency_ratio=0.3, train_file=str(own))) is None
    assert _unlabeled_file(TaskDistillationSpec(unlabeled_file=bundled)) == bundled
    with pytest.raises(ValueError, match="--unlabeled_file /nonexistent.tsv does not exist"):
        TaskDistillationSpec(unlabeled_file="/nonexistent.tsv")


def test_the_students_copies_are_the_users_number_else_the_recipes(tmp_path):
    """``distill task --augment_copies``: a number the user gives is the student's, also for a narrowed tiny student
    that learns from unlabeled sentences; without one, the recipe's copies, and none for that tiny student. The
    progress line says what the student is taught on."""
    import transformers

    from compact_bert.configuration import preset_config
    from compact_bert.distillation.data import packaged_teacher_dir
    from compact_bert.jobs.finetune import FinetuneModelArguments
    from compact_bert.jobs.task_comparison import comparison_runs

    teacher = str(packaged_teacher_dir())
    teacher_config = transformers.AutoConfig.from_pretrained(teacher)
    narrow = {"num_hidden_layers": 3, "hidden_size": 256, "num_attention_heads": 8, "intermediate_size": 512}
    student_config = preset_config("minilm-3l-384h", teacher_config=teacher_config, **narrow)
    unlabeled = str(bundled_sst2_files()["unlabeled"])

    def student_run(given, unlabeled_file):
        spec = TaskDistillationSpec(output_dir=str(tmp_path / f"job-{given}"), augment_copies=given)
        student = FinetuneModelArguments(model_name_or_path="minilm-3l-384h", model_overrides=narrow)
        runs = comparison_runs(
            student,
            student_config,
            teacher,
            teacher_config,
            spec.folders(),
            spec,
            spec.augment_copies,
            False,
            unlabeled_file=unlabeled_file,
        )
        return runs["student"]

    assert student_run(None, unlabeled).training.augment_copies == 0
    assert "taught by the fine-tuned teacher on the unlabeled sentences of unlabeled.tsv.gz;" in (
        student_run(None, unlabeled).describe()
    )
    assert student_run(1, unlabeled).training.augment_copies == 1
    assert "on 1 copies and the unlabeled sentences of unlabeled.tsv.gz;" in student_run(1, unlabeled).describe()
    assert student_run(None, None).training.augment_copies == AUGMENT_COPIES
    assert "on the training sentences alone;" in student_run(0, None).describe()


def test_a_bad_unlabeled_file_is_refused_before_anything_is_timed_or_trained(tmp_path, monkeypatch):
    """``distill task --unlabeled_file`` is read whole first: a file without the text column, or with an empty
    sentence, is named with its line before the latency budget is timed and before the teacher trains."""
    import compact_bert.evaluation.runtime_latency as runtime_latency
    from compact_bert.training.run_errors import RunSettingsError

    def never(*args, **kwargs):
        raise AssertionError("timed before the unlabeled file was read")

    monkeypatch.setattr(runtime_latency, "measure_interleaved", never)
    wrong = tmp_path / "wrong.tsv"
    wrong.write_text("text\na fine film\n", encoding="utf-8")
    empty = tmp_path / "empty.tsv"
    empty.write_text("sentence\na fine film\n \n", encoding="utf-8")
    for path, message in ((wrong, "has no column 'sentence'"), (empty, f"{empty}:3: column 'sentence' holds ' '")):
        spec = TaskDistillationSpec(output_dir=str(tmp_path / "job"), max_latency_ratio=0.3, unlabeled_file=str(path))
        with pytest.raises(RunSettingsError, match=message.replace("(", r"\(")):
            distill_task(spec)
    assert not [path for path in tmp_path.iterdir() if path.name.startswith("job")]
