"""The failure catalogue, one case per family: each bad setting, file or model ends the command with
``compact-bert: <message>`` (exit status 1, no traceback), naming the flag / file / row and what is valid, before
any training.

Each case builds what a user would hold (a file, a folder, a saved dataset), runs the command in-process through
``compact_bert.cli.main.main`` and checks the one message it must print. A few cases run as a separate process too,
to check what the terminal shows: one line, no traceback. The families' other cases live beside the code they
test (``test_early_errors``, ``test_weights_and_numbers``, ``test_data_validation``, ``test_run_folder``, ...)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import datasets
import pytest

from compact_bert.cli.main import main
from compact_bert.distillation.data import packaged_teacher_dir
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from tests.distillation.cli_helpers import HELD_OUT, QUIET, cli_command, environment

TINY = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_experts": 1,
    "max_position_embeddings": 64,
}


def _pretrain(tmp_path: Path, *flags: str, overrides: dict | None = None) -> list[str]:
    corpus = ["--corpus", str(HELD_OUT)] if "--corpus" not in flags else []
    return [
        "pretrain",
        "--preset",
        "vanilla-bert-small",
        "--model_overrides",
        json.dumps({**TINY, **(overrides or {})}),
        "--output_dir",
        str(tmp_path / "run"),
        "--max_steps",
        "1",
        "--block_size",
        "32",
        *corpus,
        *QUIET,
        *flags,
    ]


def _finetune(tmp_path: Path, *flags: str) -> list[str]:
    files = bundled_sst2_files()
    data = [] if "--train_file" in flags else ["--train_file", str(files["train"])]
    return [
        "finetune",
        "--model_name_or_path",
        "minilm-3l-96h",
        "--validation_file",
        str(files["validation"]),
        "--output_dir",
        str(tmp_path / "run"),
        "--max_steps",
        "1",
        *data,
        *QUIET,
        *flags,
    ]


def _saved_dataset(folder: Path, rows: dict, split: str | None = None) -> Path:
    dataset = datasets.Dataset.from_dict(rows)
    (datasets.DatasetDict({split: dataset}) if split else dataset).save_to_disk(str(folder))
    return folder


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def _truncated_model(folder: Path) -> Path:
    import shutil

    shutil.copytree(packaged_teacher_dir(), folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    return folder


def _tokenizer_folder(folder: Path, swap_first_tokens: bool = False, size: int | None = None) -> Path:
    """A WordPiece tokenizer from the teacher's vocabulary: with two tokens swapped (same size, other ids), or cut
    to ``size`` tokens."""
    from transformers import BertTokenizerFast

    vocabulary = (packaged_teacher_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    if swap_first_tokens:
        vocabulary[1000], vocabulary[1001] = vocabulary[1001], vocabulary[1000]
    vocabulary = vocabulary[:size] if size else vocabulary
    _write(folder / "vocab.txt", "\n".join(vocabulary) + "\n")
    BertTokenizerFast.from_pretrained(folder).save_pretrained(folder)
    return folder


def _folder_with_summary(folder: Path, summary: str) -> Path:
    """A saved tiny model whose ``run_summary.json`` holds ``summary`` (empty: a write cut short by a full disk)."""
    _write(_tiny_minimoe_folder(folder) / "run_summary.json", summary)
    return folder


def _tiny_minimoe_folder(folder: Path) -> Path:
    from transformers import AutoModelForMaskedLM

    from compact_bert.configuration import MiniMoEConfig

    AutoModelForMaskedLM.from_config(MiniMoEConfig(**{**TINY, "num_experts": 2})).save_pretrained(folder)
    return folder


def _truncated_mobilebert(folder: Path) -> Path:
    from transformers import AutoModel

    from tests.conftest import tiny_configs

    AutoModel.from_config(tiny_configs()["mobilebert"]).save_pretrained(folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return folder


def _config_only(folder: Path, truncate: bool = False) -> Path:
    text = (packaged_teacher_dir() / "config.json").read_text()
    _write(folder / "config.json", text[: len(text) // 2] if truncate else text)
    return folder


# (case id, argv from tmp_path, the message's regex). Every argv is built lazily: cases create their own inputs.
CASES = [
    # -- corpora
    (
        "corpus-missing-file",
        lambda t: _pretrain(t, "--corpus", str(t / "missing.txt")),
        r"Corpus path .*missing\.txt does not exist: give UTF-8 \.txt files",
    ),
    (
        "corpus-folder-without-text",
        lambda t: _pretrain(t, "--corpus", str(_write(t / "texts" / "a.csv", "x").parent)),
        r"Corpus folder .*texts contains no \.txt files",
    ),
    (
        "corpus-dataset-dict-without-train",
        lambda t: _pretrain(t, "--corpus", str(_saved_dataset(t / "dd", {"text": ["a b c"]}, split="validation"))),
        r"is a DatasetDict without a 'train' split \(its splits: validation\)",
    ),
    (
        "corpus-saved-dataset-with-none",
        lambda t: _pretrain(t, "--corpus", str(_saved_dataset(t / "ds", {"text": ["some words here", None]}))),
        r"row 1 of column 'text' is None \(NoneType\), not text",
    ),
    (
        "corpus-non-utf8",
        lambda t: _pretrain(
            t,
            "--corpus",
            str(_write(t / "latin1.txt", b"caf\xe9 au lait\n")),
        ),
        r"latin1\.txt is not UTF-8: byte 0xe9 at line 1",
    ),
    (
        "eval-corpus-shorter-than-a-block",
        lambda t: _pretrain(t, "--eval_corpus", str(_write(t / "short.txt", "Too short.\n"))),
        r"The held-out corpus \(.*short\.txt\) yields no block of 32 tokens",
    ),
    # -- model shapes against data and tokenizer
    (
        "block-size-over-positions",
        lambda t: _pretrain(t, "--block_size", "128"),
        r"`block_size` \(128\) exceeds the model's `max_position_embeddings` \(64\)",
    ),
    (
        "vocabulary-mismatch",
        lambda t: _pretrain(t, overrides={"vocab_size": 1000}),
        r"The tokenizer has 30522 tokens but the model's `vocab_size` is 1000",
    ),
    (
        "config-transformers-name",
        lambda t: _pretrain(t, overrides={"num_layers": 2}),
        r"--model_overrides: MoEBertConfig has no field `num_layers`: compact-bert calls it `num_hidden_layers`",
    ),
    (
        "teacher-layer-out-of-range",
        lambda t: [
            "distill",
            "minimoe",
            "--finetune",
            "false",
            "--teacher_layer",
            "9",
            "--output_dir",
            str(t / "run"),
            "--max_steps",
            "1",
            "--corpus",
            str(HELD_OUT),
            "--block_size",
            "32",
            *QUIET,
        ],
        r"`teacher_layer` 9 is out of range for a model with 6 layers",
    ),
    (
        "mobilebert-teacher-of-another-family",
        lambda t: [
            "distill",
            "mobilebert",
            "--teacher",
            str(_tiny_minimoe_folder(t / "minimoe")),
            "--output_dir",
            str(t / "run"),
            "--max_steps",
            "1",
            "--corpus",
            str(HELD_OUT),
            "--block_size",
            "32",
            *QUIET,
        ],
        r"The teacher is a 'minimoe' model; MobileBERT knowledge transfer needs an IB-BERT teacher",
    ),
    # -- numbers
    ("seed-out-of-range", lambda t: _pretrain(t, "--seed", "-1"), r"--seed"),
    ("negative-learning-rate", lambda t: _pretrain(t, "--learning_rate", "-1"), r"--learning_rate"),
    (
        "diverged-with-logging-steps-beyond-the-run",
        lambda t: _pretrain(
            t, "--max_steps", "8", "--learning_rate", "1e4", "--logging_steps", "1000", "--save_strategy", "no"
        ),
        r"Training diverged at step 8: .*no final model was written",
    ),
    # -- fine-tuning data and models
    (
        "finetune-mixed-label-kinds",
        lambda t: _finetune(
            t,
            "--train_file",
            str(_write(t / "mixed.jsonl", '{"sentence": "good", "label": 1}\n{"sentence": "bad", "label": "neg"}\n')),
        ),
        r"mixed\.jsonl",
    ),
    (
        "finetune-truncated-weights",
        lambda t: _finetune(t, "--model_name_or_path", str(_truncated_model(t / "teacher"))),
        r"model\.safetensors",
    ),
    (
        "finetune-model-overrides-with-a-folder",
        lambda t: _finetune(
            t, "--model_name_or_path", str(packaged_teacher_dir()), "--model_overrides", '{"num_hidden_layers": 2}'
        ),
        r"--model_overrides applies to presets only",
    ),
    (
        "finetune-tokenizer-of-another-vocabulary",
        lambda t: _finetune(
            t,
            "--model_name_or_path",
            str(packaged_teacher_dir()),
            "--tokenizer_name",
            str(_tokenizer_folder(t / "swapped", swap_first_tokens=True)),
        ),
        r"--tokenizer_name .*swapped: its vocabulary is not the one saved with the model",
    ),
    (
        "finetune-tokenizer-of-another-size",
        lambda t: _finetune(t, "--tokenizer_name", str(_tokenizer_folder(t / "small", size=500))),
        r"The tokenizer has 500 tokens but the model's vocab_size is 30522",
    ),
    (
        "finetune-folder-without-weights",
        lambda t: _finetune(t, "--model_name_or_path", str(_config_only(t / "config-only"))),
        r"config-only",
    ),
    (
        "finetune-truncated-config",
        lambda t: _finetune(t, "--model_name_or_path", str(_config_only(t / "half-config", truncate=True))),
        r"half-config.*config\.json",
    ),
    (
        "finetune-nan-regression-label",
        lambda t: _finetune(
            t,
            "--task_type",
            "regression",
            "--train_file",
            str(_write(t / "scores.tsv", "sentence\tlabel\nfine\t0.5\nodd\tnan\n")),
            "--validation_file",
            str(_write(t / "dev.tsv", "sentence\tlabel\nok\t1.0\n")),
        ),
        r"scores\.tsv:3: column 'label' holds 'nan', not a finite number",
    ),
    (
        "finetune-unknown-metric",
        lambda t: _finetune(t, "--metric_for_best_model", "bogus"),
        r"--metric_for_best_model",
    ),
    # -- conversion and shipping
    (
        "convert-truncated-weights",
        lambda t: ["convert", str(_truncated_mobilebert(t / "mobilebert")), str(t / "out")],
        r"convert: source .*mobilebert: its weights file model\.safetensors cannot be read",
    ),
    (
        "convert-into-a-file",
        lambda t: ["convert", str(packaged_teacher_dir()), str(_write(t / "taken.txt", "x"))],
        r"convert: target .*taken\.txt is a file",
    ),
    (
        "push-dry-run-empty-run-summary",
        lambda t: ["push", str(_folder_with_summary(t / "model", "")), "user/model", "--dry-run"],
        r"run_summary\.json is empty: expected a run summary \(a JSON object\)",
    ),
    (
        "push-dry-run-truncated-run-summary",
        lambda t: [
            "push",
            str(_folder_with_summary(t / "model", '{"teacher": "all-MiniLM-L6-v2",\n "seed"')),
            "u/m",
            "--dry-run",
        ],
        r"run_summary\.json:2:\d+: not valid JSON .*expected a run summary",
    ),
    (
        "push-dry-run-truncated-weights",
        lambda t: ["push", str(_truncated_model(t / "model")), "user/model", "--dry-run"],
        r"push: DIR .*model: its weights file model\.safetensors cannot be read",
    ),
]


@pytest.mark.parametrize(("build", "message"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_failure_ends_in_one_message_naming_its_cause(tmp_path, build, message):
    with pytest.raises(SystemExit) as raised:
        main(build(tmp_path))
    text = str(raised.value.code)
    assert text.startswith("compact-bert: "), text
    assert re.search(message, text), text
    assert not (tmp_path / "run" / "model.safetensors").exists(), "a model was saved although the run failed"


@pytest.mark.parametrize("case", ["corpus-saved-dataset-with-none", "finetune-truncated-weights"])
def test_the_terminal_shows_the_message_alone(tmp_path, case):
    build, message = next(entry[1:] for entry in CASES if entry[0] == case)
    result = subprocess.run(
        cli_command(build(tmp_path)), capture_output=True, text=True, env=environment(), timeout=600
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("compact-bert: ") and re.search(message, last), result.stderr[-2000:]
