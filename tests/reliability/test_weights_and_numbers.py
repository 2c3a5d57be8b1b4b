"""A config that disagrees with its weights, corrupted weights, float16 with NoNorm and a
diverging learning rate each end in an early, named error instead of a raw size mismatch or NaN outputs.

The weight checks run where compact-bert loads a folder (``training.checked_loading.load_checked``, what every command
uses), not in an override of transformers' ``from_pretrained``: the model classes override nothing of loading."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, TrainingArguments

from compact_bert.modeling import IBBertForPreTraining
from compact_bert.training.checked_loading import load_checked
from compact_bert.training.checkpoint_checks import CheckpointMismatchError
from compact_bert.training.precision_checks import UnsupportedPrecisionError, check_precision_supported
from tests.conftest import tiny_configs
from tests.distillation.cli_helpers import QUICK_DATA, QUIET, cli_command, environment, refusal_in_this_process
from tests.distillation.helpers import tiny_ib_bert_config, tiny_mobilebert_config

CHECKPOINT_MISMATCH_ERRORS = CheckpointMismatchError


def _save(model, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder


def _edit_config(folder: Path, **fields) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(fields)
    path.write_text(json.dumps(config))


@pytest.mark.parametrize("ignore_mismatched_sizes", [False, True])
def test_num_experts_mismatch_names_the_field_value_and_checkpoint_shape(tmp_path, ignore_mismatched_sizes):
    folder = _save(AutoModelForMaskedLM.from_config(tiny_configs()["moe_bert"]), tmp_path)  # 8 experts
    _edit_config(folder, num_experts=4)
    with pytest.raises(CHECKPOINT_MISMATCH_ERRORS) as error:
        load_checked(AutoModelForMaskedLM, folder, "MODEL", ignore_mismatched_sizes=ignore_mismatched_sizes)
    message = str(error.value)
    assert "`num_experts` is 4 in the config but 8 in the checkpoint" in message
    assert (
        "moe_bert.encoder.layer.0.moe.experts.up_proj has shape [8, 48, 32] in the checkpoint, [4, 48, 32]" in message
    )
    assert str(folder) in message


@pytest.mark.parametrize("family", ["mobilebert", "minimoe"])
def test_vocab_size_mismatch_names_the_field_on_base_and_head_models(tmp_path, family):
    config = tiny_configs()[family]
    folder = _save(AutoModelForMaskedLM.from_config(config), tmp_path)
    _edit_config(folder, vocab_size=100)
    for auto_class in (AutoModelForMaskedLM, AutoModel):
        with pytest.raises(
            CHECKPOINT_MISMATCH_ERRORS, match=r"`vocab_size` is 100 in the config but 128 in the checkpoint"
        ):
            load_checked(auto_class, folder, "MODEL")


@pytest.mark.parametrize(
    ("configured", "message"),
    [(1, "is 1 in the config but the checkpoint has 2"), (3, "is 3 in the config but the checkpoint has 2")],
)
def test_layer_count_mismatch_is_an_error_not_a_warning(tmp_path, configured, message):
    folder = _save(AutoModelForMaskedLM.from_config(tiny_configs()["minimoe"]), tmp_path)
    _edit_config(folder, num_hidden_layers=configured)
    with pytest.raises(CHECKPOINT_MISMATCH_ERRORS, match=f"`num_hidden_layers` {message} encoder layers"):
        load_checked(AutoModelForMaskedLM, folder, "MODEL")


def test_a_new_task_head_may_differ_only_with_ignore_mismatched_sizes(tmp_path):
    """What `compact-bert finetune` does with a saved classifier and a new label set."""
    config = tiny_configs()["minimoe"]
    config.num_labels = 2
    trained = AutoModelForSequenceClassification.from_config(config)
    folder = _save(trained, tmp_path)
    _edit_config(folder, id2label={"0": "a", "1": "b", "2": "c"}, label2id={"a": 0, "b": 1, "c": 2})
    with pytest.raises(CHECKPOINT_MISMATCH_ERRORS, match=r"`num_labels` is 3 in the config but 2 in the checkpoint"):
        load_checked(AutoModelForSequenceClassification, folder, "MODEL")
    loaded = load_checked(AutoModelForSequenceClassification, folder, "MODEL", ignore_mismatched_sizes=True)
    assert loaded.classifier.weight.shape == (3, 32)
    torch.testing.assert_close(
        loaded.state_dict()["minimoe.embeddings.word_embeddings.weight"],
        trained.state_dict()["minimoe.embeddings.word_embeddings.weight"],
    )


def _overwrite_with_nan(file: Path, tensor_name: str) -> None:
    """Overwrite the bytes of one float32 tensor in a safetensors file with NaN, keeping the header valid."""
    data = bytearray(file.read_bytes())
    (header_length,) = struct.unpack("<Q", data[:8])
    entry = json.loads(data[8 : 8 + header_length])[tensor_name]
    assert entry["dtype"] == "F32"
    start, end = (8 + header_length + offset for offset in entry["data_offsets"])
    data[start:end] = struct.pack("<f", math.nan) * ((end - start) // 4)
    file.write_bytes(bytes(data))


def test_nan_bytes_in_model_safetensors_fail_naming_the_tensor_and_file(tmp_path):
    folder = _save(AutoModelForMaskedLM.from_config(tiny_configs()["minimoe"]), tmp_path)
    name = "minimoe.encoder.layer.1.attention.self.query.weight"
    _overwrite_with_nan(folder / "model.safetensors", name)
    assert torch.isnan(load_file(folder / "model.safetensors")[name]).all()  # the file itself is still readable
    with pytest.raises(CHECKPOINT_MISMATCH_ERRORS) as error:
        load_checked(AutoModelForMaskedLM, folder, "MODEL")
    assert f"{name} (in {folder / 'model.safetensors'})" in str(error.value) and "NaN or infinite" in str(error.value)
    with pytest.raises(CHECKPOINT_MISMATCH_ERRORS, match="encoder.layer.1.attention.self.query.weight"):
        load_checked(AutoModel, folder, "MODEL")  # the base model names the tensor without the head's prefix


def test_huge_but_finite_weights_whose_sum_overflows_still_load(tmp_path):
    model = AutoModelForMaskedLM.from_config(tiny_configs()["minimoe"])
    with torch.no_grad():
        model.minimoe.encoder.layer[0].attention.self.query.weight.fill_(3e38)  # its float32 sum is inf
    loaded = load_checked(AutoModelForMaskedLM, _save(model, tmp_path), "MODEL")
    assert loaded.minimoe.encoder.layer[0].attention.self.query.weight.max().item() == pytest.approx(3e38)


def test_fp16_is_refused_for_nonorm_models_and_allowed_for_layer_norm(tmp_path):
    arguments = TrainingArguments(str(tmp_path), fp16=True, use_cpu=True, report_to="none")
    no_norm = AutoModel.from_config(tiny_configs()["mobilebert"])
    with pytest.raises(UnsupportedPrecisionError, match="NoNorm activations .* reach about 1e7.*--bf16"):
        check_precision_supported(arguments, model=no_norm)
    check_precision_supported(arguments, model=AutoModel.from_config(tiny_configs()["mobilebert_wo_opt"]))
    check_precision_supported(
        TrainingArguments(str(tmp_path), bf16=True, use_cpu=True, report_to="none"), model=no_norm
    )


def test_fp16_full_eval_is_refused_for_nonorm_models(tmp_path):
    arguments = TrainingArguments(str(tmp_path), fp16_full_eval=True, use_cpu=True, report_to="none")
    with pytest.raises(UnsupportedPrecisionError, match="--fp16_full_eval is not supported for the model"):
        check_precision_supported(arguments, model=AutoModel.from_config(tiny_configs()["mobilebert"]))


@pytest.mark.parametrize("family", ["mobilebert", "ib_bert"])
def test_nonorm_models_refuse_float16_outside_training_too(tmp_path, family):
    """``.half()`` or ``dtype=torch.float16`` gave inf/NaN outputs on trained weights without a word."""
    config = tiny_configs()[family]
    config.normalization_type = "no_norm"
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    input_ids = torch.randint(5, config.vocab_size, (2, 8))
    float_output = model(input_ids=input_ids).last_hidden_state
    model.save_pretrained(tmp_path)
    message = r"NoNorm \(normalization_type='no_norm'\) does not run in float16: .*about 1e7.*Use bfloat16"
    for half in (model.half(), AutoModel.from_pretrained(tmp_path, dtype=torch.float16)):
        with pytest.raises(ValueError, match=message):
            half(input_ids=input_ids)
    bf16 = AutoModel.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    assert torch.allclose(bf16(input_ids=input_ids).last_hidden_state.float(), float_output, rtol=0.05, atol=0.05)


def test_every_trainer_refuses_fp16_with_a_nonorm_model_or_teacher(tmp_path):
    from compact_bert.distillation.trainer_utils import DistillationTrainer
    from compact_bert.finetuning.finetune_trainer import FinetuneTrainer

    arguments = TrainingArguments(str(tmp_path), fp16=True, use_cpu=True, report_to="none")
    configs = tiny_configs()
    with pytest.raises(UnsupportedPrecisionError, match="for the model"):
        FinetuneTrainer(model=AutoModelForSequenceClassification.from_config(configs["mobilebert"]), args=arguments)
    no_norm_teacher = configs["ib_bert"]
    no_norm_teacher.normalization_type = "no_norm"
    with pytest.raises(UnsupportedPrecisionError, match=r"for the teacher \(IBBertModel"):
        DistillationTrainer(
            AutoModel.from_config(configs["mobilebert_wo_opt"]), AutoModel.from_config(no_norm_teacher), arguments
        )


def test_pretrain_with_fp16_of_a_nonorm_preset_exits_with_the_reason(tmp_path):
    overrides = json.dumps(
        {
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "intra_bottleneck_size": 16,
            "intermediate_size": 32,
            "embedding_size": 16,
        }
    )
    refusal = refusal_in_this_process(
        [
            "pretrain",
            "--preset",
            "mobilebert",
            "--model_overrides",
            overrides,
            "--output_dir",
            str(tmp_path),
            "--max_steps",
            "2",
            "--fp16",
            "true",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    assert "--fp16 is not supported for the model" in refusal and "use --bf16 true" in refusal.lower(), refusal


def test_distill_mobilebert_with_fp16_exits_with_the_reason(tmp_path):
    teacher = tmp_path / "teacher"
    IBBertForPreTraining(tiny_ib_bert_config()).save_pretrained(teacher)
    student = json.dumps(
        {
            key: value
            for key, value in tiny_mobilebert_config().to_diff_dict().items()
            if key not in ("model_type", "transformers_version")
        }
    )
    output = tmp_path / "student"
    refusal = refusal_in_this_process(
        [
            "distill",
            "mobilebert",
            "--teacher",
            str(teacher),
            "--student_overrides",
            student,
            "--output_dir",
            str(output),
            "--max_steps",
            "2",
            "--fp16",
            "true",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    assert "compact-bert: --fp16 is not supported for the model (CompactMobileBertForPreTraining" in refusal
    assert not (output / "model.safetensors").exists()


def test_diverging_learning_rate_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    overrides = json.dumps(
        {
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "num_experts": 2,
        }
    )
    result = subprocess.run(
        cli_command(
            [
                "pretrain",
                "--preset",
                "moe-bert-small",
                "--model_overrides",
                overrides,
                "--output_dir",
                str(tmp_path),
                "--max_steps",
                "20",
                "--learning_rate",
                "1e4",
                "--logging_steps",
                "1",
                "--save_steps",
                "1",
                "--per_device_train_batch_size",
                "4",
                *QUICK_DATA,
                *QUIET,
            ]
        ),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=600,
    )
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
    assert "compact-bert: Training diverged at step 2:" in result.stderr, result.stderr[-3000:]
    assert re.search(r"the loss [0-9.e+]+ is [0-9.e+]+ times the first logged loss", result.stderr)
    assert re.search(r"learning rate 9\.5e\+03", result.stderr)  # 1e4 decayed linearly over 20 steps, at step 2
    assert f"the last checkpoint, {tmp_path / 'checkpoint-1'}, is kept" in result.stderr
    assert "Traceback" not in result.stderr
    # Neither the diverged state nor anything after it was saved: no final model, no checkpoint-2.
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("checkpoint")) == ["checkpoint-1"]
    assert not (tmp_path / "model.safetensors").exists() and not (tmp_path / "run_summary.json").exists()
    assert all(
        torch.isfinite(tensor).all() for tensor in load_file(tmp_path / "checkpoint-1" / "model.safetensors").values()
    )


def _guard_call(logs: dict, model=None, output_dir: str = "unused"):
    from transformers import TrainerControl, TrainerState

    from compact_bert.training.loss_guard import LossGuardCallback

    guard, state = LossGuardCallback(), TrainerState()
    arguments = type("Arguments", (), {"output_dir": output_dir})()
    state.global_step = 1
    guard.on_log(arguments, state, TrainerControl(), logs={"loss": 4.0, "learning_rate": 1e-3}, model=model)
    state.global_step = 7
    guard.on_log(arguments, state, TrainerControl(), logs=logs, model=model)


def test_loss_guard_stops_on_nan_loss_and_on_nan_weights_behind_a_filtered_loss():
    from compact_bert.training.loss_guard import TrainingDivergedError

    model = torch.nn.Linear(2, 2)
    _guard_call({"loss": 300.0, "learning_rate": 1e-3}, model)  # 75× the first loss: still within 100×
    with pytest.raises(TrainingDivergedError, match=r"step 7: the loss is nan; learning rate 0\.001"):
        _guard_call({"loss": math.nan, "learning_rate": 1e-3}, model)
    with pytest.raises(TrainingDivergedError, match=r"step 7: the loss 401 is 100 times the first logged loss"):
        _guard_call({"loss": 401.0, "learning_rate": 1e-3}, model)
    with torch.no_grad():
        model.weight[0, 0] = math.inf
    # transformers' logging_nan_inf_filter keeps the logged loss finite once steps turn NaN: the weights tell.
    with pytest.raises(TrainingDivergedError, match=r"weight weight holds NaN or infinite values \(logged loss 4\)"):
        _guard_call({"loss": 4.0, "learning_rate": 1e-3}, model)


def test_loss_guard_logs_before_every_save_so_no_unchecked_state_is_saved():
    from transformers import TrainerControl, TrainerState

    from compact_bert.training.loss_guard import LossGuardCallback

    control = TrainerControl(should_save=True, should_log=False)
    LossGuardCallback().on_step_end(None, TrainerState(), control)
    assert control.should_log
    quiet = TrainerControl(should_save=False, should_log=False)
    LossGuardCallback().on_step_end(None, TrainerState(), quiet)
    assert not quiet.should_log


def test_loss_guard_measures_each_mobilebert_stage_against_its_own_first_loss():
    """A layer-wise stage's feature-map loss can be far below the pre-training distillation loss that follows it:
    a new ``stage`` restarts the reference, and an explosion inside the new stage still stops the run."""
    from transformers import TrainerControl, TrainerState

    from compact_bert.training.loss_guard import LossGuardCallback, TrainingDivergedError

    guard, state = LossGuardCallback(), TrainerState()
    arguments = type("Arguments", (), {"output_dir": "unused"})()
    for step, loss, stage in ((25, 0.05, 0), (50, 0.04, 0), (75, 7.0, 1), (100, 6.5, 1)):
        state.global_step = step
        guard.on_log(arguments, state, TrainerControl(), logs={"loss": loss, "stage": stage, "learning_rate": 1e-3})
    state.global_step = 125
    with pytest.raises(
        TrainingDivergedError, match=r"step 125: the loss 800 is 114 times the first logged loss \(7 at step 75"
    ):
        guard.on_log(arguments, state, TrainerControl(), logs={"loss": 800.0, "stage": 1, "learning_rate": 1e-3})


def _without(folder: Path, fragment: str) -> None:
    """Rewrite the folder's weights without the tensors whose name contains ``fragment``."""
    from safetensors.torch import save_file

    weights = load_file(folder / "model.safetensors")
    save_file(
        {name: tensor for name, tensor in weights.items() if fragment not in name},
        folder / "model.safetensors",
        metadata={"format": "pt"},
    )


def test_teacher_with_missing_ffn_weights_is_refused_with_the_list(tmp_path):
    from transformers import BertConfig, BertModel

    from compact_bert.distillation.teachers import load_encoder
    from compact_bert.training.checked_loading import WeightsLoadError

    config = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    folder = _save(BertModel(config), tmp_path / "teacher")  # a transformers teacher: no checks of our own apply
    _without(folder, "layer.1.intermediate")
    with pytest.raises(
        WeightsLoadError,
        match=r"--teacher .*2 backbone weight\(s\) missing from the checkpoint "
        r"\(encoder\.layer\.1\.intermediate",
    ):
        load_encoder(str(folder))


def test_truncated_weights_are_named_not_a_safetensors_traceback(tmp_path):
    from compact_bert.distillation.teachers import load_encoder
    from compact_bert.training.checked_loading import WeightsLoadError

    folder = _save(AutoModel.from_config(tiny_configs()["minimoe"]), tmp_path / "teacher")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(
        WeightsLoadError, match=r"--teacher .*teacher: its weights file model\.safetensors cannot be read"
    ):
        load_encoder(str(folder))


def test_config_of_another_model_type_over_the_weights_is_refused(tmp_path):
    from transformers import BertConfig, BertModel, DistilBertConfig

    from compact_bert.training.checked_loading import WeightsLoadError, load_checked

    folder = _save(
        BertModel(
            BertConfig(
                vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
            )
        ),
        tmp_path / "model",
    )
    DistilBertConfig(vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64).save_pretrained(folder)
    with pytest.raises(WeightsLoadError, match="weight\\(s\\) missing .*do not fill: they would start random"):
        load_checked(AutoModel, folder, "--model_name_or_path")


def test_exporting_a_base_model_as_a_classifier_is_refused(tmp_path):
    pytest.importorskip("onnxruntime")
    from compact_bert.cli.main import main

    folder = _save(AutoModel.from_config(tiny_configs()["minimoe"]), tmp_path / "model")
    with pytest.raises(SystemExit, match=r"weight\(s\) missing .*classifier"):
        main(["export", "onnx", str(folder), str(tmp_path / "onnx"), "--task", "token-classification"])


def test_a_checked_load_keeps_transformers_load_report_off_the_console(monkeypatch):
    """load_checked reads transformers' load report itself (refusing missing backbone weights), so the report's
    table (8 lines for a new classifier) is not printed — nor the tensor-parallel warning transformers 5 adds when
    its loader's log level is raised; ``--verbose`` shows the table."""
    from transformers import AutoModelForSequenceClassification

    from compact_bert.distillation.data import packaged_teacher_dir
    from compact_bert.training.checked_loading import load_checked
    from compact_bert.training.console_log import VERBOSE_VARIABLE
    from tests.log_records import recorded_messages

    with recorded_messages("transformers") as messages:
        monkeypatch.delenv(VERBOSE_VARIABLE, raising=False)
        load_checked(AutoModelForSequenceClassification, packaged_teacher_dir(), "--model_name_or_path", num_labels=2)
        quiet = list(messages)
        monkeypatch.setenv(VERBOSE_VARIABLE, "1")
        load_checked(AutoModelForSequenceClassification, packaged_teacher_dir(), "--model_name_or_path", num_labels=2)
    assert not [
        message
        for message in quiet
        if "LOAD REPORT" in message or "not sharded" in message or "were not initialized" in message
    ], quiet
    assert any("LOAD REPORT" in message or "were not initialized" in message for message in messages[len(quiet) :])
