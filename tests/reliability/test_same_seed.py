"""Same seed → bitwise-equal weights, for the commands ``tests/reliability/test_bitwise_resume.py`` does not already
run twice with one seed (it does for ``distill minimoe``, ``distill tcd``, ``distill mobilebert``, ``pretrain`` and
``finetune`` without a teacher): ``distill embeddings`` (with its relation loss, so the relation kernel runs) and
``finetune --teacher`` (teacher logits, augmented copies, the recipe). A run's summary names the relation kernel it
used and why (``relation_kernels.relation_kernel_record``): the native library is loaded once per process, so a
run never changes kernels halfway, whatever another process does to the shared cache.
"""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from safetensors.torch import load_file

from compact_bert.cli.main import main
from compact_bert.distillation.relation_kernels import RELATION_KERNELS, relation_kernel_record
from compact_bert.embeddings.bundled_corpus import bundled_stsb_sentences
from compact_bert.embeddings.sentences import read_sentences
from compact_bert.evaluation.sts import bundled_sts_validation
from tests.distillation.cli_helpers import QUIET, REPO_ROOT
from tests.reliability.test_bitwise_resume import _assert_bitwise_equal

SST2_SLICE = REPO_ROOT / "finetuning" / "sst2_slice"
TINY_MINIMOE = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
    "num_experts": 2,
}


def _weights(folder) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _twice(arguments: list[str], tmp_path) -> tuple:
    for name in ("first", "second"):
        assert main([*arguments, "--output_dir", str(tmp_path / name)]) == 0
    return tmp_path / "first", tmp_path / "second"


def test_embedding_distillation_with_one_seed_twice_gives_the_same_weights_and_names_its_kernel(tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(read_sentences([bundled_stsb_sentences()])[:96]) + "\n")
    sts = tmp_path / "sts.tsv"  # the first 40 STS-B dev pairs: the run's evaluation stays short
    sts.write_text("\n".join(gzip.decompress(bundled_sts_validation().read_bytes()).decode().splitlines()[:41]) + "\n")
    arguments = [
        "distill",
        "embeddings",
        "--student_preset",
        "minimoe-4l-192h",
        "--student_overrides",
        json.dumps(TINY_MINIMOE),
        "--sentences",
        str(sentences),
        "--sts_file",
        str(sts),
        "--teacher_cache_dir",
        str(tmp_path / "cache"),
        "--relation_weight",
        "1.0",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "16",
        "--max_seq_length",
        "32",
        "--save_strategy",
        "no",
        *QUIET,
    ]
    first, second = _twice(arguments, tmp_path)
    _assert_bitwise_equal(_weights(first), _weights(second))
    records = [json.loads((folder / "run_summary.json").read_text())["relation_kernel"] for folder in (first, second)]
    assert records[0] == records[1] and records[0]["kernel"] in RELATION_KERNELS and records[0]["reason"]


def test_finetune_with_a_teacher_with_one_seed_twice_gives_the_same_weights(tmp_path):
    data = ["--train_file", str(SST2_SLICE / "train.tsv"), "--validation_file", str(SST2_SLICE / "validation.tsv")]
    quick = ["--task_name", "sst2", "--max_seq_length", "32", "--max_train_samples", "48", "--max_eval_samples", "16"]
    teacher = tmp_path / "teacher"
    tiny = json.dumps({key: value for key, value in TINY_MINIMOE.items() if key != "num_experts"})
    common = [*data, *quick, "--per_device_train_batch_size", "16", *QUIET]
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-384h",
                "--model_overrides",
                tiny,
                "--init_from_teacher",
                "none",
                "--max_steps",
                "2",
                "--output_dir",
                str(teacher),
                *common,
            ]
        )
        == 0
    )
    student = ["finetune", "--model_name_or_path", "minilm-3l-384h", "--teacher", str(teacher)]
    student += ["--model_overrides", json.dumps({"num_hidden_layers": 1}), "--max_steps", "3", *common]
    student += ["--teacher_cache_dir", str(tmp_path / "cache")]
    first, second = _twice(student, tmp_path)
    _assert_bitwise_equal(_weights(first), _weights(second))
    summary = json.loads((first / "run_summary.json").read_text())
    assert summary["task_distillation"]["augment_copies"] == 4  # the recipe's copies: the teacher's labels ran


@pytest.mark.parametrize("variable", ["eager", None])
def test_the_kernel_record_says_which_backend_runs_and_why(monkeypatch, variable):
    if variable is None:
        monkeypatch.delenv("COMPACT_BERT_RELATION_KERNEL", raising=False)
    else:
        monkeypatch.setenv("COMPACT_BERT_RELATION_KERNEL", variable)
    record = relation_kernel_record("cpu")
    assert record["requested"] == (variable or "auto")
    if variable == "eager":
        assert record == {"kernel": "eager", "requested": "eager", "reason": "$COMPACT_BERT_RELATION_KERNEL=eager"}
    elif record["kernel"] == "native":
        assert record["reason"].startswith("the compiled C kernel ")
    else:
        assert record["reason"].startswith("the native kernel is unavailable: ")
