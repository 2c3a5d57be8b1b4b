"""``compact-bert finetune`` end to end on tiny models and small real SST-2 / CoNLL-2003 slices."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
)

from compact_bert.cli.main import main
from compact_bert.finetuning.data import (
    FinetuneDataArguments,
    load_finetuning_data,
    tokenize_sequence_dataset,
    tokenize_token_dataset,
)
from tests.conftest import SHARED_DATA, needs_shared_data, tiny_configs

pytestmark = needs_shared_data(
    "sst2/train.tsv", "sst2/validation.tsv", "conll2003/train.txt", "conll2003/validation.txt"
)
FAMILIES = ("ib_bert", "mobilebert", "minimoe", "moe_bert")
MOE_FAMILIES = ("minimoe", "moe_bert")
TINY_MINIMOE = '{"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 48}'


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """32 training and 16 dev examples of each task, taken from the real files."""
    folder = tmp_path_factory.mktemp("data")
    for split, rows in (("train", 32), ("validation", 16)):
        lines = (SHARED_DATA / "sst2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        (folder / f"sst2_{split}.tsv").write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
        blocks = (SHARED_DATA / "conll2003" / f"{split}.txt").read_text(encoding="utf-8").split("\n\n")
        (folder / f"conll_{split}.txt").write_text("\n\n".join(blocks[:rows]) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    """A saved tiny model of each family with the real vocabulary (no tokenizer: the default one is used)."""
    from transformers import AutoModel

    folders = {}
    for family in FAMILIES:
        config = tiny_configs()[family]
        config.vocab_size = 30522
        torch.manual_seed(0)
        folder = tmp_path_factory.mktemp(family)
        AutoModel.from_config(config).save_pretrained(folder)
        folders[family] = folder
    return folders


def task_arguments(data_dir: Path, task: str) -> list[str]:
    if task == "sst2":
        return [
            "--task_name",
            "sst2",
            "--train_file",
            str(data_dir / "sst2_train.tsv"),
            "--validation_file",
            str(data_dir / "sst2_validation.tsv"),
        ]
    return [
        "--task_name",
        "ner",
        "--train_file",
        str(data_dir / "conll_train.txt"),
        "--validation_file",
        str(data_dir / "conll_validation.txt"),
    ]


QUICK = [
    "--per_device_train_batch_size",
    "8",
    "--learning_rate",
    "3e-3",
    "--logging_strategy",
    "steps",
    "--logging_steps",
    "2",
    "--report_to",
    "none",
    "--save_total_limit",
    "1",
    "--dataloader_pin_memory",
    "false",
]


def finetune(model: str, output_dir: Path, extra: list[str]) -> dict:
    assert main(["finetune", "--model_name_or_path", model, "--output_dir", str(output_dir), *QUICK, *extra]) == 0
    return json.loads((output_dir / "run_summary.json").read_text())


def reload_and_evaluate(folder: Path, data_dir: Path, task: str) -> dict:
    """Accuracy / tag accuracy and task loss of the saved folder on the whole dev slice in one batch."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    splits = load_finetuning_data(
        FinetuneDataArguments(
            task_name="sst2" if task == "sst2" else "ner",
            train_file=str(data_dir / ("sst2_train.tsv" if task == "sst2" else "conll_train.txt")),
            validation_file=str(data_dir / ("sst2_validation.tsv" if task == "sst2" else "conll_validation.txt")),
        )
    )
    if task == "sst2":
        model = AutoModelForSequenceClassification.from_pretrained(folder)
        dataset = tokenize_sequence_dataset(splits.validation, tokenizer, splits.text_columns, 64)
        batch = DataCollatorWithPadding(tokenizer)(list(dataset))
    else:
        model = AutoModelForTokenClassification.from_pretrained(folder)
        dataset = tokenize_token_dataset(splits.validation, tokenizer, 128)
        batch = DataCollatorForTokenClassification(tokenizer)(list(dataset))
    model.eval()
    with torch.no_grad():
        outputs = model(**batch)
    task_loss = outputs.loss - (outputs.aux_loss if getattr(outputs, "aux_loss", None) is not None else 0)
    predictions = outputs.logits.argmax(-1)
    kept = batch["labels"] != -100
    return {
        "model": model,
        "task_loss": float(task_loss),
        "predictions": predictions[kept],
        "accuracy": float((predictions[kept] == batch["labels"][kept]).float().mean()),
    }


@pytest.mark.parametrize("task", ["sst2", "ner"])
@pytest.mark.parametrize("family", FAMILIES)
def test_finetune_every_family(family, task, model_dirs, data_dir, tmp_path):
    output = tmp_path / "out"
    summary = finetune(
        str(model_dirs[family]), output, [*task_arguments(data_dir, task), "--num_train_epochs", "3", "--seed", "1"]
    )
    metric = "eval_accuracy" if task == "sst2" else "eval_overall_f1"
    assert metric in summary and summary["label_names"]
    if task == "ner":
        assert summary["label_names"][0] == "O" and "eval_overall_precision" in summary
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    train_losses = [entry["loss"] for entry in history if "loss" in entry]
    assert train_losses[-1] < train_losses[0], train_losses
    if family in MOE_FAMILIES:
        assert {"eval_task_loss", "eval_balance_loss", "eval_block0_max_expert_share"} <= set(summary)
        assert summary["eval_block0_dropped_fraction"] == 0.0  # evaluation never drops tokens
        assert summary["eval_loss"] == pytest.approx(
            summary["eval_task_loss"] + summary["eval_balance_loss"], abs=2e-4
        )
        assert any("balance_loss" in entry and "task_loss" in entry for entry in history)
    saved = json.loads((output / "config.json").read_text())  # what a script reads; num_labels = len(id2label)
    assert list(saved["id2label"].values()) == summary["label_names"]
    assert AutoConfig.from_pretrained(output).num_labels == len(summary["label_names"])
    if task == "sst2":
        assert saved["problem_type"] == "single_label_classification"
    reloaded = reload_and_evaluate(output, data_dir, task)
    # One batch here, the Trainer's per-batch means there: for NER (a mean over tokens) the two differ slightly.
    tolerance = {"abs": 1e-4} if task == "sst2" else {"rel": 1e-3}
    assert reloaded["task_loss"] == pytest.approx(summary.get("eval_task_loss", summary["eval_loss"]), **tolerance)
    if task == "sst2":
        assert reloaded["accuracy"] == pytest.approx(summary["eval_accuracy"], abs=1e-4)
    again = reload_and_evaluate(output, data_dir, task)
    assert torch.equal(again["predictions"], reloaded["predictions"])


def test_same_seed_same_weights_and_seed_grid_summary(data_dir, tmp_path):
    command = [
        "--model_overrides",
        TINY_MINIMOE,
        *task_arguments(data_dir, "sst2"),
        "--max_steps",
        "3",
        "--seed",
        "5",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "3",
        "--save_strategy",
        "steps",
        "--save_steps",
        "3",
    ]
    finetune("minimoe-4l-192h", tmp_path / "a", command)
    finetune("minimoe-4l-192h", tmp_path / "b", command)
    first, second = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)

    grid = [*command, "--seeds", "0", "1", "--learning_rate_grid", "1e-3", "5e-3"]
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minimoe-4l-192h",
                "--output_dir",
                str(tmp_path / "grid"),
                *QUICK,
                *grid,
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "grid" / "run_summary.json").read_text())
    assert summary["metric_for_best_model"] == "eval_accuracy" and len(summary["runs"]) == 4
    assert {entry["learning_rate"] for entry in summary["per_setting"]} == {1e-3, 5e-3}
    best = summary["best"]
    assert best["eval_accuracy"]["n"] == 2 and best["eval_accuracy"]["std"] >= 0
    assert best["eval_accuracy"]["mean"] == max(entry["eval_accuracy"]["mean"] for entry in summary["per_setting"])
    assert (tmp_path / "grid" / "lr-0.005" / "seed-1" / "model.safetensors").is_file()


def test_bad_input_fails_before_training(data_dir, tmp_path):
    with pytest.raises(SystemExit, match="no column 'question'"):
        finetune(
            "minimoe-4l-192h",
            tmp_path / "x",
            [
                "--model_overrides",
                TINY_MINIMOE,
                "--task_name",
                "qnli",
                "--train_file",
                str(data_dir / "sst2_train.tsv"),
            ],
        )
    with pytest.raises(SystemExit, match="neither a model folder"):
        finetune(str(tmp_path / "missing"), tmp_path / "x", task_arguments(data_dir, "sst2"))


USER_SCRIPT = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class BlockCompactBert(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "compact_bert" or name.startswith("compact_bert."):
                raise ModuleNotFoundError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, BlockCompactBert())
    import numpy as np
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments

    folder, output = sys.argv[1], sys.argv[2]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
    texts = ["a great film", "dull and slow", "wonderful acting", "a waste of time"] * 4
    data = datasets.Dataset.from_dict({"text": texts, "label": [1, 0, 1, 0] * 4})
    data = data.map(lambda batch: tokenizer(batch["text"], truncation=True), batched=True, remove_columns=["text"])

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}

    arguments = TrainingArguments(output_dir=output, max_steps=3, per_device_train_batch_size=4, report_to="none",
                                  use_cpu=True, save_strategy="no")
    trainer = Trainer(model=model, args=arguments, train_dataset=data, eval_dataset=data,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute_metrics)
    trainer.train()
    metrics = trainer.evaluate()
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    print("METRICS", json.dumps(metrics))
    """
)


def test_user_script_without_compact_bert_finetunes_a_saved_minimoe(data_dir, tmp_path):
    folder = tmp_path / "minimoe"
    finetune(
        "minimoe-4l-192h",
        folder,
        [
            "--model_overrides",
            TINY_MINIMOE,
            *task_arguments(data_dir, "sst2"),
            "--max_steps",
            "2",
            "--eval_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
        ],
    )
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "user.py"), str(folder), str(tmp_path / "user_out")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    metrics = json.loads(result.stdout.split("METRICS", 1)[1])
    # 16 dev sentences: the accuracy is a count / 16; two steps leave the fresh binary head near chance (ln 2).
    assert metrics["eval_accuracy"] * 16 == pytest.approx(round(metrics["eval_accuracy"] * 16), abs=1e-6)
    assert metrics["eval_loss"] == pytest.approx(math.log(2), abs=0.1)


def test_config_defaults_follow_the_papers():
    from compact_bert.finetuning.finetune_config import FinetuneConfig

    config = FinetuneConfig(output_dir="unused", report_to="none")
    assert config.get_warmup_steps(1000) == 100  # warm-up proportion 0.1, paper 002 Table 8, on both lines
    assert (config.weight_decay, config.num_train_epochs, config.per_device_train_batch_size) == (0.01, 10, 32)
    assert config.lr_scheduler_type == "linear" and config.eval_strategy == "epoch" and config.load_best_model_at_end
    assert config.early_stopping_patience == 5 and config.router_aux_loss_coef is None
    with pytest.raises(ValueError, match="router_aux_loss_coef"):
        FinetuneConfig(output_dir="unused", report_to="none", router_aux_loss_coef=-1.0)
    assert (
        FinetuneConfig(
            output_dir="unused", report_to="none", load_best_model_at_end=False, eval_strategy="no"
        ).early_stopping_patience
        is None
    )


def test_regression_with_balance_coefficient_override(data_dir, tmp_path):
    rows = "".join(f"a sentence {index}\tanother one {index % 3}\t{index % 5}.5\n" for index in range(24))
    (tmp_path / "train.tsv").write_text("sentence1\tsentence2\tlabel\n" + rows, encoding="utf-8")
    output = tmp_path / "out"
    summary = finetune(
        "minimoe-4l-192h",
        output,
        [
            "--model_overrides",
            TINY_MINIMOE,
            "--task_name",
            "stsb",
            "--train_file",
            str(tmp_path / "train.tsv"),
            "--validation_file",
            str(tmp_path / "train.tsv"),
            "--num_train_epochs",
            "1",
            "--router_aux_loss_coef",
            "0",
        ],
    )
    assert {"eval_pearson", "eval_spearmanr"} <= set(summary) and summary["eval_balance_loss"] == 0.0
    config = AutoConfig.from_pretrained(output)
    assert (config.num_labels, config.problem_type, config.router_aux_loss_coef) == (1, "regression", 0.0)


def test_bert_like_transformers_folder_with_its_tokenizer(data_dir, tmp_path):
    from compact_bert.distillation.data import packaged_teacher_dir

    output = tmp_path / "bert"
    summary = finetune(
        str(packaged_teacher_dir()),
        output,
        [
            *task_arguments(data_dir, "sst2"),
            "--max_train_samples",
            "8",
            "--max_eval_samples",
            "8",
            "--max_steps",
            "1",
        ],
    )
    assert summary["model_type"] == "bert" and "eval_accuracy" in summary
    assert AutoModelForSequenceClassification.from_pretrained(output).config.id2label == {
        0: "negative",
        1: "positive",
    }  # SST-2 ids named
    assert (output / "tokenizer.json").is_file() and (output / "vocab.txt").is_file()


def test_peft_adapter_and_merge_wiring(model_dirs, data_dir, tmp_path):
    from peft import PeftModel

    output = tmp_path / "lora"
    summary = finetune(
        str(model_dirs["ib_bert"]),
        output,
        [
            *task_arguments(data_dir, "sst2"),
            "--max_steps",
            "4",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--peft",
            "lora",
            "--peft_r",
            "4",
            "--merge",
        ],
    )
    assert (output / "adapter_config.json").is_file() and "eval_accuracy" in summary
    merged = AutoModelForSequenceClassification.from_pretrained(summary["merged_model_dir"]).eval()
    base = AutoModelForSequenceClassification.from_pretrained(model_dirs["ib_bert"], num_labels=2)
    adapted = PeftModel.from_pretrained(base, output).eval()
    tokenizer = AutoTokenizer.from_pretrained(summary["merged_model_dir"])
    batch = tokenizer(["a great film", "dull and slow"], return_tensors="pt", padding=True)
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, adapted(**batch).logits, rtol=1e-4, atol=1e-5)
    with pytest.raises(SystemExit, match="Unknown PEFT method 'prefix'; valid methods: lora, ia3"):
        finetune(str(model_dirs["ib_bert"]), tmp_path / "x", [*task_arguments(data_dir, "sst2"), "--peft", "prefix"])
    with pytest.raises(SystemExit, match="--merge merges a PEFT adapter"):
        finetune(str(model_dirs["ib_bert"]), tmp_path / "x", [*task_arguments(data_dir, "sst2"), "--merge"])


def test_peft_on_the_experts_of_a_moe_student(data_dir, tmp_path):
    """Default dropout becomes 0 where the experts' stacked weights are adapted (PEFT's parameter LoRA)."""
    output = tmp_path / "lora"
    finetune(
        "minimoe-4l-192h",
        output,
        [
            "--model_overrides",
            TINY_MINIMOE,
            *task_arguments(data_dir, "sst2"),
            "--max_steps",
            "2",
            "--eval_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
            "--peft",
            "lora",
            "--merge",
        ],
    )
    assert (output / "adapter_config.json").is_file() and (output / "merged" / "config.json").is_file()


def test_adapter_size_grid_with_learning_rates(data_dir, tmp_path):
    """--adapter_size_grid runs every LoRA rank x learning rate (x seed) and picks the best averaged setting."""
    output = tmp_path / "grid"
    finetune(
        "minimoe-4l-192h",
        output,
        [
            "--model_overrides",
            TINY_MINIMOE,
            *task_arguments(data_dir, "sst2"),
            "--max_steps",
            "2",
            "--eval_strategy",
            "no",
            "--load_best_model_at_end",
            "false",
            "--peft",
            "lora",
            "--adapter_size_grid",
            "2",
            "4",
            "--learning_rate_grid",
            "1e-3",
            "5e-3",
        ],
    )
    summary = json.loads((output / "run_summary.json").read_text())
    assert len(summary["runs"]) == 4
    settings = {(entry["adapter_size"], entry["learning_rate"]) for entry in summary["per_setting"]}
    assert settings == {(2, 1e-3), (2, 5e-3), (4, 1e-3), (4, 5e-3)}
    best = summary["best"]
    assert best["eval_accuracy"]["mean"] == max(entry["eval_accuracy"]["mean"] for entry in summary["per_setting"])
    for rank in (2, 4):
        adapter = json.loads((output / f"r-{rank}" / "lr-0.005" / "adapter_config.json").read_text())
        assert adapter["r"] == rank


def test_adapter_size_grid_needs_lora(data_dir, tmp_path):
    with pytest.raises(SystemExit, match="--adapter_size_grid sets the LoRA rank: it needs --peft lora"):
        finetune(
            "minimoe-4l-192h", tmp_path / "x", [*task_arguments(data_dir, "sst2"), "--adapter_size_grid", "8", "16"]
        )
    with pytest.raises(SystemExit, match="--adapter_size_grid sets the LoRA rank: it needs --peft lora"):
        finetune(
            "minimoe-4l-192h",
            tmp_path / "x",
            [*task_arguments(data_dir, "sst2"), "--peft", "ia3", "--adapter_size_grid", "8"],
        )
