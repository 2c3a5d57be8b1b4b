"""`compact-bert distill minimoe` / `distill tcd` end to end: main-job folder, TA chain, accelerate, SIGKILL."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import torch
import transformers

from compact_bert.configuration import MoEBertConfig
from compact_bert.evaluation.latency_report import read_latency
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.task_recipe import AUGMENT_COPIES, LEARNING_RATE
from compact_bert.modeling import MiniMoEModel, MoEBertForMaskedLM, MoEBertModel
from tests.distillation.cli_helpers import (
    QUICK_DATA,
    QUIET,
    refusal_in_this_process,
    run_cli,
    run_in_this_process,
)
from tests.remote_code_helpers import load_classifier_without_compact_bert, load_in_fresh_process

TINY_MINIMOE = json.dumps(
    {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
        "num_experts": 4,
    }
)
# The main job's default student (a dense MiniLM preset: transformers' BERT) at test size; head size 32 as the teacher's.
TINY_DENSE = json.dumps({key: value for key, value in json.loads(TINY_MINIMOE).items() if key != "num_experts"})
TINY_ASSISTANT = json.dumps(
    {
        "hidden_size": 128,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
    }
)
TINY_MOE_BERT = json.dumps(
    {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_experts": 4,
        "max_position_embeddings": 64,
    }
)
TCD_SAMPLING = ["--sampled_tokens", "128", "--token_group_size", "32"]


def _minimoe(output, steps, *extra, finetune=False):
    return [
        "distill",
        "minimoe",
        "--student_overrides",
        TINY_MINIMOE,
        "--output_dir",
        str(output),
        "--max_steps",
        str(steps),
        "--per_device_train_batch_size",
        "8",
        "--logging_steps",
        "1",
        "--save_steps",
        "4",
        "--finetune",
        str(finetune).lower(),
        *QUICK_DATA,
        *QUIET,
        *extra,
    ]


def _sst2_accuracy(folder, rows: int) -> float:
    """Accuracy of a saved classifier on the first ``rows`` sentences of the bundled dev set, recomputed here."""
    lines = bundled_sst2_files()["validation"].read_text(encoding="utf-8").splitlines()[1 : rows + 1]
    sentences, labels = zip(*(line.rsplit("\t", 1) for line in lines))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    batch = tokenizer(list(sentences), truncation=True, max_length=64, padding=True, return_tensors="pt")
    with torch.no_grad():
        predicted = model(**batch).logits.argmax(-1)
    # GLUE's SST-2 labels are the ids (0 negative, 1 positive: the names the model's id2label carries)
    assert model.config.id2label == {0: "negative", 1: "positive"}
    return float((predicted == torch.tensor([int(label) for label in labels])).float().mean())


@pytest.fixture(scope="module")
def vanilla_teacher(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vanilla")
    overrides = json.dumps({**json.loads(TINY_MOE_BERT), "num_experts": 1})
    run_in_this_process(
        [
            "pretrain",
            "--preset",
            "vanilla-bert-small",
            "--model_overrides",
            overrides,
            "--output_dir",
            str(folder),
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "4",
            *QUICK_DATA,
            *QUIET,
        ]
    )
    return folder


def _tcd(teacher, output, steps, *extra):
    return [
        "distill",
        "tcd",
        "--teacher",
        str(teacher),
        "--student_overrides",
        TINY_MOE_BERT,
        "--output_dir",
        str(output),
        "--max_steps",
        str(steps),
        "--per_device_train_batch_size",
        "8",
        "--logging_steps",
        "1",
        "--save_steps",
        "4",
        *TCD_SAMPLING,
        *QUICK_DATA,
        *QUIET,
        *extra,
    ]


def test_main_job_folder_loads_everywhere(tmp_path):
    """The main job at tiny size: the teacher fine-tuned on the bundled SST-2 slice teaches a student that starts
    from its layers, beside the layer-dropped baseline; the reported accuracies are what the saved folders give,
    the comparison table is printed, and the shipped classifier — transformers' BERT, no code in any folder — loads
    without remote code in processes without compact-bert, on this transformers line and the other."""
    output = tmp_path / "student"
    quick = ["--max_train_samples", "48", "--max_eval_samples", "40", "--per_device_train_batch_size", "16"]
    task_job = ["distill", "task", "--student_overrides", TINY_DENSE, "--output_dir", str(output)]
    result = run_cli([*task_job, *quick, "--num_train_epochs", "1"])
    summary = json.loads((output / "run_summary.json").read_text())
    finetuned = tmp_path / "student-sst2"
    assert summary["finetune_output_dir"] == str(finetuned.resolve()) and summary["finetune_runs"] == 1
    assert summary["finetune_train_file"] == str(bundled_sst2_files()["train"]) and summary["finetune_seconds"] > 0
    assert summary["sst2_eval_accuracy"] == pytest.approx(_sst2_accuracy(finetuned, 40), abs=1e-4)
    # 48 rows and the recipe's augmented copies of each, 16 a step
    student_run = json.loads((finetuned / "run_summary.json").read_text())
    assert student_run["optimizer_steps"] == 48 * (1 + AUGMENT_COPIES) // 16
    assert student_run["task_distillation"]["teacher"] == str(tmp_path / "student-teacher-sst2")
    assert student_run["reported_checkpoint"] == "final model (no selection on the dev set)"
    assert student_run["learning_rate"] == LEARNING_RATE  # the recipe's rate; the teacher and baseline keep 1e-4
    comparison = summary["comparison"]
    # the baseline has the student's depth: the pretrained teacher's layers 2, 5 of 6 (evenly spaced, ending at the last)
    assert comparison["baseline"].startswith("the pretrained teacher's layers 2, 5 ")
    for role, folder in (("teacher", "student-teacher-sst2"), ("baseline", "student-baseline-sst2")):
        run = json.loads((tmp_path / folder / "run_summary.json").read_text())
        assert run["eval_accuracy"] == comparison["sst2_accuracy"][role] and run["optimizer_steps"] == 3
        assert run["learning_rate"] == 1e-4
    assert summary["teacher"] == "all-MiniLM-L6-v2" and summary["teacher_initialization"]["layer_map"] == [2, 5]
    config = json.loads((finetuned / "config.json").read_text())
    assert config["teacher_initialization"]["layer_map"] == [2, 5] and config["model_type"] == "bert"
    for folder in (finetuned, tmp_path / "student-baseline-sst2", tmp_path / "student-teacher-sst2"):
        on_disk = json.loads((folder / "config.json").read_text())
        assert on_disk["model_type"] == "bert" and "auto_map" not in on_disk, folder
        assert not list(folder.rglob("*.py")), list(folder.rglob("*.py"))
    assert "trust_remote_code" not in summary["finetune_load_with"]
    # config.json is pushed: the local teacher is named by its folder's name, no path of this machine in it
    assert config["teacher_initialization"]["teacher"] == "student-teacher-sst2"
    assert str(tmp_path) not in (finetuned / "config.json").read_text()
    assert config["teacher_initialization"]["hidden_channels"] == "top 64 of 384 by importance"
    assert summary["student_active_params_per_token"] == summary["student_total_params"]
    assert "SST-2 dev acc." in result.stdout and "\nbaseline " in result.stdout
    _check_shipping_step(summary, finetuned, result.stdout)
    # the 40 dev sentences the job scored: the reported accuracy is recomputed in processes without compact-bert
    lines = bundled_sst2_files()["validation"].read_text(encoding="utf-8").splitlines()[1:41]
    sentences, labels = zip(*(line.rsplit("\t", 1) for line in lines))
    tokenizer = transformers.AutoTokenizer.from_pretrained(finetuned)
    inputs = dict(tokenizer(list(sentences), truncation=True, max_length=64, padding=True, return_tensors="pt"))
    classifier = transformers.AutoModelForSequenceClassification.from_pretrained(finetuned).eval()
    with torch.no_grad():
        logits = classifier(**inputs).logits
    reference = {"inputs": inputs, "expected": logits, "labels": torch.tensor([int(label) for label in labels])}
    torch.save({**reference, "accuracy": summary["sst2_eval_accuracy"]}, tmp_path / "classifier.pt")
    load_classifier_without_compact_bert(finetuned, tmp_path / "classifier.pt", tmp_path)


def test_the_main_job_takes_its_depth_from_a_latency_budget(tmp_path):
    """``distill task --max_latency_ratio``: the student's depth is measured against the teacher before anything
    trains, the baseline gets the same depth, and the choice is recorded; an impossible budget fails first."""
    from compact_bert.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["distill", "task", "--output_dir", str(tmp_path / "never"), "--max_latency_ratio", "0.001"])
    assert "no student depth fits" in str(exit_info.value.code)
    assert not (tmp_path / "never-teacher-sst2").exists()
    output = tmp_path / "job"
    result = run_cli(
        [
            "distill",
            "task",
            "--student_preset",
            "minimoe-3l-384h",
            "--student_overrides",
            json.dumps({key: value for key, value in json.loads(TINY_MINIMOE).items() if key != "num_hidden_layers"}),
            "--max_latency_ratio",
            "0.99",
            "--export_onnx",
            "false",
            "--output_dir",
            str(output),
            "--max_train_samples",
            "16",
            "--max_eval_samples",
            "16",
            "--per_device_train_batch_size",
            "16",
            "--num_train_epochs",
            "1",
        ]
    )
    summary = json.loads((output / "run_summary.json").read_text())
    # a 64-wide student is far below the 384-wide teacher at every depth: the deepest below the teacher's 6
    assert summary["depth_by_latency_budget"]["num_hidden_layers"] == 5
    assert "Depth by latency budget: 5 layers" in result.stdout
    student_config = json.loads((tmp_path / "job-sst2" / "config.json").read_text())
    assert student_config["num_hidden_layers"] == 5
    # a mixture-of-experts student stays compact-bert's model type, with its remote code
    assert student_config["model_type"] == "minimoe" and student_config["num_experts"] == 4
    assert "auto_map" in student_config and (tmp_path / "job-sst2" / "modeling_minimoe.py").is_file()
    assert summary["comparison"]["baseline"].startswith("the pretrained teacher's layers 1, 2, 3, 4, 5 ")
    # the student's card says the budget sized it; the dense baseline's does not: the budget timed the MoE shape
    cards = {role: (tmp_path / f"job-{role}sst2" / "README.md").read_text("utf-8") for role in ("", "baseline-")}
    assert ["Sized by `--max_latency_ratio 0.99`" in cards[role] for role in ("", "baseline-")] == [True, False]


def test_the_main_jobs_help_lists_exactly_the_flags_it_accepts(tmp_path, capsys):
    """``distill task`` has its own flags (the spec's fields), not TrainingArguments': ``--help`` lists them, and a
    flag it does not have is refused, named, before anything is built."""
    import dataclasses

    from compact_bert.cli.main import main
    from compact_bert.jobs.distill_task import TaskDistillationSpec

    with pytest.raises(SystemExit):
        main(["distill", "task", "--help"])
    # each flag once as --snake_case (argparse also lists a --kebab-case spelling, and --no_X for a true boolean)
    listed = set(re.findall(r"--([a-z][a-z_]*)(?![a-z_-])", capsys.readouterr().out)) - {"help", "no_export_onnx"}
    assert listed == {item.name for item in dataclasses.fields(TaskDistillationSpec)}
    for flag in ("--warmup_steps", "--gradient_accumulation_steps"):
        with pytest.raises(SystemExit) as exit_info:
            main(["distill", "task", "--output_dir", str(tmp_path / "job"), flag, "4"])
        assert flag in str(exit_info.value.code) and "not used" in str(exit_info.value.code)
    assert not (tmp_path / "job").exists()


def test_general_distillation_starts_from_the_teacher_and_loads_everywhere(tmp_path):
    """``--finetune false``: relation distillation of a student initialized from the pretrained teacher (width
    reduced by importance, upcycled experts); the folder records the mapping and loads without compact-bert."""
    output = tmp_path / "student"
    result = run_cli(_minimoe(output, 4))
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["teacher"] == "all-MiniLM-L6-v2" and summary["optimizer_steps"] == 4
    assert "eval_relation_loss" in summary and "eval_block0_max_expert_share" in summary
    assert summary["teacher_initialization"]["layers"][0]["mode"] == "upcycled"
    assert "Student initialized from its teacher" in result.stdout and str(output.resolve()) in result.stdout
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "modeling_minimoe.py"):
        assert (output / name).is_file(), name
    model = transformers.AutoModel.from_pretrained(output).eval()
    assert isinstance(model, MiniMoEModel) and model.config.num_experts == 4
    assert model.config.teacher_initialization["layer_map"] == [2, 5]
    assert model.config.teacher_initialization["teacher"] == "sentence-transformers/all-MiniLM-L6-v2"
    inputs = {
        "input_ids": torch.tensor([[101, 7592, 2088, 102]]),
        "attention_mask": torch.ones(1, 4, dtype=torch.long),
    }
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
    torch.save({"inputs": inputs, "expected": expected}, tmp_path / "reference.pt")
    load_in_fresh_process(
        [
            {
                "folder": str(output),
                "auto_name": "AutoModel",
                "output": "last_hidden_state",
                "reference": str(tmp_path / "reference.pt"),
            }
        ],
        tmp_path,
    )


def _check_shipping_step(summary: dict, finetuned, stdout: str) -> None:
    """ONNX + int8 next to the fine-tuned classifier, their accuracy on the same dev sentences as PyTorch's, the
    latency the card shows, the summary table and the push listing."""
    if importlib.util.find_spec("onnxruntime") is None:
        assert "ONNX export skipped" in stdout and "onnx_sst2_accuracy" not in summary
        return
    assert (finetuned / "onnx" / "model.onnx").is_file() and (finetuned / "onnx" / "model_quantized.onnx").is_file()
    assert summary["onnx_sst2_accuracy"] == pytest.approx(summary["sst2_eval_accuracy"], abs=1e-4)  # 40 sentences
    assert summary["onnx_int8_bytes"] < summary["onnx_fp32_bytes"] and summary["onnx_parity_max_abs_diff"] < 1e-4
    latency = read_latency(finetuned)
    assert latency.sequence_length == 64  # 64 positions
    assert set(latency.runtimes) == {"eager", "onnx", "onnx-standard", "onnx-int8"}
    assert latency.runtimes["onnx-int8"].file == "onnx/model_quantized.onnx"
    # a BERT student ships standard ONNX and ONNX Runtime's fused graph (one Attention per layer), the int8 model
    # made from the fused one; the card times the fused file
    assert latency.runtimes["onnx"].file == "onnx/model_optimized.onnx"
    assert latency.runtimes["onnx-standard"].file == "onnx/model.onnx"
    assert (
        summary["onnx_fused_operators"]["Attention"]
        == json.loads((finetuned / "config.json").read_text())["num_hidden_layers"]
    )
    assert summary["onnx_standard_sst2_accuracy"] == pytest.approx(summary["sst2_eval_accuracy"], abs=1e-4)
    card = (finetuned / "README.md").read_text(encoding="utf-8")
    assert "onnx/model_quantized.onnx" in card and f"{latency.runtimes['eager'].median_ms:.2f}" in card
    assert "SST-2 dev accuracy: PyTorch / ONNX fp32 / ONNX int8" in stdout
    listing = stdout[stdout.index("--dry-run` (which also prints the card) lists:") :]
    shipped = ("onnx/model.onnx", "onnx/model_optimized.onnx", "onnx/model_quantized.onnx", "latency.json")
    for name in (*shipped, "model.safetensors", "README.md"):
        assert f"  {name}\n" in listing, name
    assert ".py\n" not in listing.split("Left out")[0]  # no code file in what a BERT student uploads
    assert "run_summary.json" not in listing.split("Left out")[0]


def test_teacher_assistant_chain_in_one_command(tmp_path):
    output = tmp_path / "student"
    run_in_this_process(
        _minimoe(
            output,
            3,
            "--teacher_assistant_preset",
            "minilm-4l-384h",
            "--teacher_assistant_overrides",
            TINY_ASSISTANT,
            "--teacher_assistant_max_steps",
            "2",
        )
    )
    assistant = json.loads((output / "teacher_assistant" / "run_summary.json").read_text())
    student = json.loads((output / "run_summary.json").read_text())
    assert assistant["role"] == "teacher_assistant" and assistant["optimizer_steps"] == 2
    assert student["role"] == "student" and student["teacher_assistant"] == "minilm-4l-384h"
    assert transformers.AutoModel.from_pretrained(output / "teacher_assistant").config.hidden_size == 128


@pytest.mark.parametrize("method", ["minimoe", "tcd"])
def test_two_process_accelerate(tmp_path, vanilla_teacher, method):
    output = tmp_path / "student"
    arguments = _minimoe(output, 4) if method == "minimoe" else _tcd(vanilla_teacher, output, 4)
    run_cli(arguments, processes=2)
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["optimizer_steps"] == 4
    auto = transformers.AutoModel if method == "minimoe" else transformers.AutoModelForMaskedLM
    assert isinstance(auto.from_pretrained(output), MiniMoEModel if method == "minimoe" else MoEBertForMaskedLM)


def test_tcd_runs_with_its_default_arguments(tmp_path):
    """Only the teacher, a tiny student, a short run, the output folder and a short evaluation (16 blocks instead
    of the default 512, the only default left out) are given: default batch (8), block size (128), sampled tokens and
    group size, corpus and evaluation must fit together."""
    teacher = tmp_path / "teacher"
    sizes = {key: value for key, value in json.loads(TINY_MOE_BERT).items() if key != "max_position_embeddings"}
    MoEBertModel(MoEBertConfig(**{**sizes, "num_experts": 1})).save_pretrained(teacher)
    output = tmp_path / "student"
    run_in_this_process(
        [
            "distill",
            "tcd",
            "--teacher",
            str(teacher),
            "--student_overrides",
            json.dumps(sizes),
            "--output_dir",
            str(output),
            "--max_steps",
            "2",
            "--max_eval_blocks",
            "16",
        ]
    )
    summary = json.loads((output / "run_summary.json").read_text())
    assert summary["optimizer_steps"] == 2 and "eval_trunk_loss" in summary and "eval_inner_loss" in summary
    config = json.loads((output / "config.json").read_text())
    assert config["model_type"] == "moe_bert" and config["architectures"] == ["MoEBertForMaskedLM"]


def test_tcd_rejects_batches_smaller_than_the_sample(tmp_path, vanilla_teacher):
    arguments = _tcd(vanilla_teacher, tmp_path, 2)
    arguments[arguments.index("--sampled_tokens") + 1] = "4096"
    assert "--sampled_tokens 4096 exceeds the 256 tokens of a batch" in refusal_in_this_process(arguments)


def test_minimoe_rejects_unknown_teacher(tmp_path):
    refusal = refusal_in_this_process(_minimoe(tmp_path, 2, "--teacher", str(tmp_path / "nowhere")))
    assert "neither a model folder" in refusal
