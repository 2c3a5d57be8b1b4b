"""Outputs never replace what the user did not name as an output: an output folder that is an input, lies inside one,
or already holds a model or a run is refused before any work unless ``--overwrite_output_dir``; an unfinished run is
resumed instead; a named output file never replaces a file of a model folder (``training/output_folders.py``)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import transformers

from compact_bert.cli.main import main
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.jobs import finetune as finetune_job
from compact_bert.jobs import task_comparison
from compact_bert.jobs.distill_task import TaskDistillationSpec, distill_task
from compact_bert.training.output_folders import (
    OutputOverwriteError,
    check_export_output,
    check_output_folder,
    folder_holdings,
)
from tests.conftest import tiny_configs
from tests.distillation.cli_helpers import QUIET

TINY_STUDENT = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
QUICK_JOB = {"max_train_samples": 32, "max_eval_samples": 32, "per_device_train_batch_size": 16, "num_train_epochs": 1}


def _digest(folder) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny BERT with the default tokenizer's vocabulary: fine-tuned in seconds."""
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    folder = tmp_path_factory.mktemp("tiny-bert")
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def _finetune(model, output, *extra: str) -> list[str]:
    files = bundled_sst2_files()
    return [
        "finetune",
        "--model_name_or_path",
        str(model),
        "--task_name",
        "sst2",
        "--train_file",
        str(files["train"]),
        "--validation_file",
        str(files["validation"]),
        "--max_train_samples",
        "16",
        "--max_eval_samples",
        "16",
        "--max_seq_length",
        "32",
        "--per_device_train_batch_size",
        "8",
        "--max_steps",
        "2",
        "--output_dir",
        str(output),
        *QUIET,
        *extra,
    ]


@pytest.fixture
def no_data_loading(monkeypatch):
    """A refusal must come before the data (and the model) are loaded."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the data was loaded before the output folder was checked")

    monkeypatch.setattr(finetune_job, "load_finetuning_data", refuse)


def test_an_output_folder_that_is_the_input_model_is_refused_and_the_model_untouched(model_dir, no_data_loading):
    before = _digest(model_dir)
    with pytest.raises(SystemExit, match=r"is the --model_name_or_path this command reads") as refused:
        main(_finetune(model_dir, model_dir))
    assert "--overwrite_output_dir" in str(refused.value) and "Choose another --output_dir" in str(refused.value)
    assert _digest(model_dir) == before


def test_an_output_folder_inside_an_input_folder_is_refused(model_dir, no_data_loading):
    with pytest.raises(SystemExit, match=r"lies inside .*, the --model_name_or_path this command reads"):
        main(_finetune(model_dir, model_dir / "finetuned"))


def test_an_output_folder_inside_a_teacher_cache_is_refused(model_dir, tmp_path, no_data_loading):
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(SystemExit, match=r"lies inside .*, the --teacher_cache_dir this command reads"):
        main(_finetune(model_dir, cache / "run", "--teacher_cache_dir", str(cache)))


def test_an_output_folder_holding_a_model_is_refused_and_overwrite_output_dir_replaces_it(model_dir, tmp_path):
    output = tmp_path / "run"
    assert main(_finetune(model_dir, output)) == 0
    before = _digest(output)
    with pytest.raises(SystemExit, match=r"already holds a model \(config\.json, model\.safetensors\)") as refused:
        main(_finetune(model_dir, output, "--learning_rate", "1e-3"))
    message = str(refused.value)
    assert str(output) in message and "a finished run's summary (run_summary.json)" in message
    assert "Pass --overwrite_output_dir to replace it or choose another --output_dir." in message
    assert _digest(output) == before
    assert main(_finetune(model_dir, output, "--learning_rate", "1e-3", "--overwrite_output_dir")) == 0
    assert json.loads((output / "run_summary.json").read_text())["learning_rate"] == 1e-3


def test_an_unfinished_run_is_refused_and_resume_continues_it_without_overwrite(model_dir, tmp_path, capsys):
    output = tmp_path / "run"
    steps = ["--max_steps", "4", "--eval_strategy", "steps", "--eval_steps", "2", "--save_strategy", "steps"]
    steps += ["--save_steps", "2", "--keep_checkpoints", "true"]
    assert main(_finetune(model_dir, output, *steps)) == 0
    for path in output.iterdir():  # as a run killed after its checkpoint at step 2 leaves the folder
        if path.name != "checkpoint-2":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    with pytest.raises(SystemExit, match=r"checkpoints of an unfinished run \(checkpoint-2\)") as refused:
        main(_finetune(model_dir, output, *steps))
    assert "Resume it with --resume_from_checkpoint last, pass --overwrite_output_dir" in str(refused.value)
    capsys.readouterr()
    assert main(_finetune(model_dir, output, *steps, "--resume_from_checkpoint", "last")) == 0
    assert json.loads((output / "run_summary.json").read_text())["optimizer_steps"] == 4


def test_folder_holdings_names_models_runs_checkpoints_and_exports(tmp_path):
    assert folder_holdings(tmp_path / "missing") == {}
    (tmp_path / "config.json").write_text("{}")
    assert folder_holdings(tmp_path) == {}  # a config alone is no model
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-9").mkdir()
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"graph")
    assert folder_holdings(tmp_path) == {
        "model": ["config.json", "model.safetensors"],
        "checkpoints": ["checkpoint-9", "checkpoint-10"],
        "export": ["onnx/"],
    }


def test_the_message_names_the_derived_folder_and_offers_no_flag_a_command_lacks(tmp_path):
    (tmp_path / "run_summary.json").write_text("{}")
    with pytest.raises(OutputOverwriteError) as refused:
        check_output_folder(tmp_path, "TARGET", name="the converted model's folder", overwrite_flag=None)
    message = str(refused.value)
    assert message.startswith(f"the converted model's folder {tmp_path} (from TARGET) already holds")
    assert "--overwrite_output_dir" not in message and message.endswith("Choose another TARGET.")
    check_output_folder(tmp_path, "--output_dir", overwrite=True)  # the user's consent
    check_output_folder(tmp_path, "--output_dir", resuming=True)  # a resumed run continues what is there


def _mobilebert_folder(folder):
    transformers.AutoModel.from_config(tiny_configs()["mobilebert"]).save_pretrained(folder)
    return folder


def test_convert_onto_its_own_source_is_refused_and_the_source_untouched(tmp_path):
    source = _mobilebert_folder(tmp_path / "source")
    before = _digest(source)
    with pytest.raises(SystemExit, match=r"TARGET .* is the SOURCE this command reads.*Choose another TARGET\."):
        main(["convert", str(source), str(source)])
    assert _digest(source) == before


def test_convert_into_a_folder_holding_a_model_is_refused(tmp_path):
    source = _mobilebert_folder(tmp_path / "source")
    other = _mobilebert_folder(tmp_path / "other")
    before = _digest(other)
    with pytest.raises(SystemExit, match=r"TARGET .*other already holds a model \(config\.json, model\.safetensors\)"):
        main(["convert", str(source), str(other)])
    assert _digest(other) == before


def test_a_named_output_file_onto_a_file_of_a_model_folder_is_refused(tmp_path):
    model = _mobilebert_folder(tmp_path / "model")
    before = _digest(model)
    with pytest.raises(SystemExit, match=r"--json .*config\.json would replace config\.json of the model in"):
        main(["benchmark", str(model), "--json", str(model / "config.json"), "--runtimes", "eager"])
    assert _digest(model) == before


def test_export_refuses_a_file_of_the_model_folder_and_another_models_folder_but_writes_its_own(tmp_path):
    model = _mobilebert_folder(tmp_path / "model")
    other = _mobilebert_folder(tmp_path / "other")
    with pytest.raises(SystemExit, match=r"OUTPUT_DIR .*config\.json is a file of the model folder"):
        main(["export", "onnx", str(model), str(model / "config.json"), "--task", "feature-extraction"])
    with pytest.raises(SystemExit, match=r"OUTPUT_DIR .* is the model folder being exported"):
        main(["export", "onnx", str(model), str(model), "--task", "feature-extraction"])
    with pytest.raises(SystemExit, match=r"OUTPUT_DIR .*other already holds a model"):
        main(["export", "onnx", str(model), str(other), "--task", "feature-extraction"])
    # The designed place: the model folder's own onnx/, also when it holds an earlier export (replaced, staged).
    (model / "onnx").mkdir()
    (model / "onnx" / "config.json").write_text("{}")
    (model / "onnx" / "model.onnx").write_bytes(b"an earlier export")
    check_export_output(model / "onnx", model)


def _job(output, **fields) -> TaskDistillationSpec:
    return TaskDistillationSpec(
        student_overrides=TINY_STUDENT, output_dir=str(output), export_onnx=False, **QUICK_JOB, **fields
    )


@pytest.fixture
def nothing_trains(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a model was trained before the output folders were checked")

    monkeypatch.setattr(task_comparison, "finetune", refuse)


def test_the_main_job_rerun_into_its_output_dir_is_refused_before_the_teacher_trains(tmp_path, nothing_trains):
    output = tmp_path / "job"
    output.mkdir()
    (output / "run_summary.json").write_text("{}")  # an earlier run's
    with pytest.raises(SystemExit, match=r"--output_dir .*job already holds a finished run's summary") as refused:
        main(["distill", "task", "--output_dir", str(output), "--export_onnx", "false"])
    assert "--overwrite_output_dir" in str(refused.value)
    assert not (tmp_path / "job-teacher-sst2").exists()


def test_the_main_job_refuses_a_model_folder_it_would_replace_naming_it(tmp_path, nothing_trains):
    student = _mobilebert_folder(tmp_path / "job-sst2")
    with pytest.raises(OutputOverwriteError, match=r"the student's folder .*job-sst2 \(from --output_dir\) already"):
        distill_task(_job(tmp_path / "job"))
    with pytest.raises(OutputOverwriteError, match=r"--student_output_dir .* is the --teacher this command reads"):
        distill_task(_job(tmp_path / "other", teacher=str(student), student_output_dir=str(student)))


@pytest.mark.slow
def test_the_main_job_rerun_with_overwrite_output_dir_replaces_the_earlier_run(tmp_path):
    output = tmp_path / "job"
    output.mkdir()
    (output / "run_summary.json").write_text('{"earlier": true}')
    _mobilebert_folder(tmp_path / "job-sst2")  # another model where the student goes
    overrides = json.dumps(TINY_STUDENT)
    flags = [item for name, value in QUICK_JOB.items() for item in (f"--{name}", str(value))]
    command = ["distill", "task", "--student_overrides", overrides, "--export_onnx", "false", *flags]
    assert main([*command, "--output_dir", str(output), "--overwrite_output_dir", "true"]) == 0
    summary = json.loads((output / "run_summary.json").read_text())
    assert "earlier" not in summary and summary["student_preset"] == "minilm-3l-384h"
    assert transformers.AutoConfig.from_pretrained(tmp_path / "job-sst2").model_type != "compact_mobilebert"
