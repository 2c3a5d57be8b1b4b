"""A run that would do nothing fails clearly, and bad arguments or data fail before
any training, with a message that names the flag or file, the value and what is valid."""

from __future__ import annotations

import errno
import json
import math
import subprocess
import sys

import pytest
import torch
from transformers import BertConfig, BertModel, TrainingArguments

from compact_bert.cli.main import main
from compact_bert.configuration import MoEBertConfig
from compact_bert.distillation.data import PretrainingCollator, resolve_text_files
from compact_bert.distillation.tcd_config import TransferCapabilityDistillationConfig
from compact_bert.distillation.tcd_trainer import TransferCapabilityDistillationTrainer
from compact_bert.distillation.trainer_utils import PretrainingTrainer
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.modeling import MoEBertForMaskedLM
from compact_bert.training.compat import save_tokenizer
from compact_bert.training.write_errors import OutputWriteError
from tests.distillation.cli_helpers import HELD_OUT, QUIET, cli_command, environment
from tests.distillation.helpers import held_out_blocks, tokenizer

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
QUICK_CORPUS = ["--corpus", str(HELD_OUT), "--block_size", "32", "--max_eval_blocks", "16"]
TRAINER_ARGS = {
    "save_strategy": "no",
    "report_to": "none",
    "disable_tqdm": True,
    "use_cpu": True,
    "seed": 0,
    "sampled_tokens": 128,
    "token_group_size": 32,
}
# The shortest valid command line of each training command; flags given later override these.
COMMANDS = {
    "pretrain": ["pretrain"],
    "distill mobilebert": ["distill", "mobilebert", "--teacher", "unused", "--max_steps", "2"],
    "distill minimoe": ["distill", "minimoe", "--finetune", "false"],
    "distill tcd": ["distill", "tcd", "--teacher", "unused"],
    "finetune": ["finetune", "--model_name_or_path", "unused", "--train_file", "unused.tsv"],
}


def _command(name: str, output_dir, *flags: str) -> list[str]:
    return [*COMMANDS[name], "--output_dir", str(output_dir), *QUIET, *flags]


def _tcd_trainer(tmp_path, train_blocks: int = 16, eval_blocks: int = 16, **fields):
    torch.manual_seed(0)
    teacher = BertModel(
        BertConfig(
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=96,
            max_position_embeddings=64,
        )
    )
    student = MoEBertForMaskedLM(
        MoEBertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            num_experts=4,
            max_position_embeddings=64,
        )
    )
    args = TransferCapabilityDistillationConfig(output_dir=str(tmp_path), max_steps=2, **{**TRAINER_ARGS, **fields})
    return TransferCapabilityDistillationTrainer(
        model=student,
        teacher=teacher,
        args=args,
        train_dataset=held_out_blocks(False).select(range(train_blocks)),
        eval_dataset=held_out_blocks(False).select(range(eval_blocks)),
        data_collator=PretrainingCollator(tokenizer()),
    )


@pytest.fixture(scope="module")
def tcd_teacher(tmp_path_factory):
    """A tiny BERT folder (bert-base-uncased vocabulary) that `distill tcd` accepts as its vanilla teacher."""
    folder = tmp_path_factory.mktemp("teacher")
    BertModel(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).save_pretrained(folder)
    return folder


# A run that would do nothing ---------------------------------------------------------------------------------


def test_zero_optimizer_steps_fail_before_training(tmp_path, tcd_teacher):
    """`distill tcd` drops incomplete training batches: 4 blocks and a batch of 8 would train 0 steps and save
    an untrained model with exit 0."""
    output = tmp_path / "student"
    arguments = [
        "distill",
        "tcd",
        "--teacher",
        str(tcd_teacher),
        "--student_overrides",
        TINY_MOE_BERT,
        "--output_dir",
        str(output),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "8",
        "--gradient_accumulation_steps",
        "2",
        "--sampled_tokens",
        "128",
        "--token_group_size",
        "32",
        *QUICK_CORPUS,
        "--max_train_blocks",
        "4",
        *QUIET,
    ]
    message = (
        r"The training set holds 4 blocks but one batch takes 8 \(--per_device_train_batch_size 8 x 1 "
        r"process\(es\)\), and --dataloader_drop_last true drops the incomplete batch: training would take 0 "
        r"optimizer steps \(--per_device_train_batch_size 8 x 1 process\(es\) x --gradient_accumulation_steps 2 "
        r"= 16 blocks per optimizer step\)\. Lower --per_device_train_batch_size to 4 or less"
    )
    with pytest.raises(SystemExit, match=message):
        main(arguments)
    assert not (output / "model.safetensors").exists() and not (output / "run_summary.json").exists()


def test_a_streamed_corpus_without_a_block_fails_before_training(tmp_path):
    """A streamed corpus has no length to count batches with: one that yields no block is refused where it is
    built (it failed in Accelerate with 'Batch does not contain any data')."""
    short = tmp_path / "short.txt"
    short.write_text("only a few words\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="The corpus yields no block of 32 tokens; give it more text"):
        main(
            [
                "pretrain",
                "--preset",
                "moe-bert-small",
                "--model_overrides",
                TINY_MOE_BERT,
                "--output_dir",
                str(tmp_path / "out"),
                "--corpus",
                str(short),
                "--streaming",
                "true",
                "--block_size",
                "32",
                "--max_eval_blocks",
                "4",
                "--max_steps",
                "2",
                *QUIET,
            ]
        )


def test_evaluation_keeps_the_incomplete_batch(tmp_path):
    """`distill tcd` sets dataloader_drop_last for training; its evaluation keeps the incomplete batch, or
    3 held-out blocks in batches of 8 would give no evaluation metric at all, and 11 blocks would lose 3 of them."""
    trainer = _tcd_trainer(tmp_path, eval_blocks=3, per_device_eval_batch_size=8)
    metrics = trainer.evaluate()
    for key in ("eval_loss", "eval_mlm_loss", "eval_trunk_loss", "eval_inner_loss"):
        assert math.isfinite(metrics[key]), key
    trainer = _tcd_trainer(
        tmp_path, train_blocks=11, eval_blocks=11, per_device_train_batch_size=8, per_device_eval_batch_size=8
    )
    assert [len(batch["input_ids"]) for batch in trainer.get_eval_dataloader()] == [8, 3]
    assert [len(batch["input_ids"]) for batch in trainer.get_train_dataloader()] == [8]  # training still drops
    assert trainer.args.dataloader_drop_last


def test_evaluation_with_fewer_tokens_than_a_group(tmp_path):
    """A last evaluation batch with fewer tokens than one relation group gave eval_trunk_loss NaN; evaluation
    batches that can never hold a group are refused up front."""
    trainer = _tcd_trainer(
        tmp_path, eval_blocks=9, per_device_eval_batch_size=8, sampled_tokens=128, token_group_size=64
    )
    metrics = trainer.evaluate()  # the last batch holds 1 block of 32 tokens < 64
    assert math.isfinite(metrics["eval_trunk_loss"]) and math.isfinite(metrics["eval_inner_loss"])
    assert math.isfinite(metrics["eval_loss"])
    message = (
        r"An evaluation batch holds 32 tokens \(1 block\(s\) of 32: --per_device_eval_batch_size 8, 1 "
        r"evaluation blocks\), fewer than one relation group \(--token_group_size 64\)"
    )
    with pytest.raises(ValueError, match=message):
        _tcd_trainer(tmp_path, eval_blocks=1, per_device_eval_batch_size=8, token_group_size=64)


@pytest.mark.parametrize("command", ["pretrain", "distill minimoe", "distill tcd", "finetune"])
@pytest.mark.parametrize("max_steps", ["0", "-2"])
def test_max_steps_zero_or_below_minus_one_is_refused(tmp_path, command, max_steps):
    with pytest.raises(
        SystemExit,
        match=rf"--max_steps must be a number of optimizer steps >= 1, or -1 to train "
        rf"for --num_train_epochs instead, got {max_steps}\.",
    ):
        main(_command(command, tmp_path, "--max_steps", max_steps))


def test_teacher_assistant_steps_must_be_positive(tmp_path):
    """--teacher_assistant_max_steps 0 fell back to --max_steps (`or`); -3 trained the assistant by epochs."""
    for steps in ("0", "-3"):
        with pytest.raises(SystemExit, match=rf"--teacher_assistant_max_steps must be >= 1 or unset, got {steps}\."):
            main(_command("distill minimoe", tmp_path, "--teacher_assistant_max_steps", steps))


def test_epoch_based_runs_need_epochs(tmp_path):
    """-1 (transformers' default) trains --num_train_epochs: 0 epochs would be a run without a step."""
    with pytest.raises(
        SystemExit, match=r"--num_train_epochs must be > 0 when training by epochs \(--max_steps -1\), got 0"
    ):
        main(_command("pretrain", tmp_path, "--max_steps", "-1", "--num_train_epochs", "0"))
    with pytest.raises(SystemExit, match="`max_steps` must be set"):  # MobileBERT's stages are counted in steps
        main(_command("distill mobilebert", tmp_path, "--max_steps", "-1"))


# Output folders and settings ---------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unwritable_output_dir_fails_before_training(command):
    """Nobody, root included, can create a folder in /proc: the run must fail before training, not after it."""
    with pytest.raises(
        SystemExit,
        match=r"--output_dir /proc/compact-bert-output is not writable \(.+\); choose a "
        "folder you can write to",
    ):
        main(_command(command, "/proc/compact-bert-output"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_output_dir_that_is_a_file(tmp_path, command):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    with pytest.raises(SystemExit, match=rf"--output_dir {taken} is a file, not a folder"):
        main(_command(command, taken))
    with pytest.raises(SystemExit, match=rf"--output_dir {taken / 'run'} cannot be created: {taken} is a file"):
        main(_command(command, taken / "run"))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_push_to_hub_is_refused_because_it_would_ship_a_pickle(tmp_path, command):
    with pytest.raises(
        SystemExit,
        match=r"--push_to_hub is not supported: .*pickled training_args.bin.*"
        r"`compact-bert push OUTPUT_DIR REPO_ID`",
    ):
        main(_command(command, tmp_path, "--push_to_hub", "true"))


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("distill minimoe", "--student_overrides"),
        ("distill tcd", "--student_overrides"),
        ("pretrain", "--model_overrides"),
    ],
)
def test_a_misspelt_override_field_is_refused_on_the_command_line(tmp_path, command, flag):
    """`num_expert` (for `num_experts`) was ignored and 4 experts trained."""
    arguments = _command(command, tmp_path, flag, json.dumps({"num_expert": 8}))
    arguments += {"pretrain": ["--preset", "moe-bert-small"], "distill tcd": ["--teacher", "all-MiniLM-L6-v2"]}.get(
        command, []
    )
    with pytest.raises(SystemExit, match=rf"{flag}: .*num_expert"):
        main(arguments)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("num_layers", "has no field `num_layers`: compact-bert calls it `num_hidden_layers`"),
        (
            "num_experts_per_tok",
            "has no field `num_experts_per_tok`: compact-bert's MoE layers route each token to exactly one expert",
        ),
        ("hidden_dropout", "has no field `hidden_dropout`: did you mean `hidden_dropout_prob`"),
        ("colour", "has no field `colour`: its fields: .*num_experts"),
    ],
)
def test_an_override_field_the_config_does_not_define_is_refused(tmp_path, field, message):
    """transformers' names for our fields and other unknown names were stored and ignored without a word."""
    arguments = _command("distill minimoe", tmp_path, "--student_overrides", json.dumps({field: 2}))
    with pytest.raises(SystemExit, match=rf"--student_overrides: MiniMoEConfig {message}"):
        main(arguments)


def test_model_overrides_with_a_model_folder_are_refused(tmp_path):
    from compact_bert.distillation.data import packaged_teacher_dir
    from compact_bert.finetuning.bundled_data import bundled_sst2_files

    files = bundled_sst2_files()
    arguments = [
        "finetune",
        "--model_name_or_path",
        str(packaged_teacher_dir()),
        "--model_overrides",
        '{"num_hidden_layers": 2}',
        "--train_file",
        str(files["train"]),
        "--validation_file",
        str(files["validation"]),
        "--output_dir",
        str(tmp_path / "run"),
    ]
    with pytest.raises(SystemExit, match=r"--model_overrides applies to presets only: .* is a model folder"):
        main(arguments)


def test_the_command_prints_a_settings_error_without_a_traceback(tmp_path):
    result = subprocess.run(
        cli_command(_command("pretrain", tmp_path, "--per_device_train_batch_size", "0")),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert "compact-bert: --per_device_train_batch_size must be >= 1, got 0." in result.stderr
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize(("method", "flag"), [("minimoe", "finetune_output_dir"), ("task", "student_output_dir")])
def test_the_student_classifiers_folder_is_checked_before_anything_trains(tmp_path, method, flag):
    with pytest.raises(SystemExit, match=f"--{flag} /proc/compact-bert-sst2 (is not writable|cannot be created)"):
        main(["distill", method, "--output_dir", str(tmp_path), f"--{flag}", "/proc/compact-bert-sst2", *QUIET])


def _pretraining_trainer(tmp_path, **fields):
    student = MoEBertForMaskedLM(
        MoEBertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            num_experts=2,
            max_position_embeddings=64,
        )
    )
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True, disable_tqdm=True, **fields)
    return PretrainingTrainer(
        model=student,
        args=args,
        train_dataset=held_out_blocks(False, 8),
        data_collator=PretrainingCollator(tokenizer()),
    )


def test_a_full_disk_is_reported_with_the_folder(tmp_path, monkeypatch):
    """The writers' own messages ('unexpected pos 8384 vs 8276', errno 28) are turned into one that names the
    folder and the cause, for the model, the checkpoints and the tokenizer."""
    trainer = _pretraining_trainer(tmp_path / "run", max_steps=1, save_strategy="steps", save_steps=1)

    def short_write(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 8384 vs 8276")

    monkeypatch.setattr(torch, "save", short_write)
    folder = tmp_path / "model"
    with pytest.raises(
        OutputWriteError,
        match=rf"Saving the model to {folder} failed: a file was written only in "
        r"part \(torch reports 'unexpected pos'\).*disk is full; free space",
    ):
        trainer.save_model(str(folder))
    checkpoint = tmp_path / "run" / "checkpoint-1"
    with pytest.raises(OutputWriteError, match=rf"Saving the model to {checkpoint} failed: .*unexpected pos"):
        trainer.train()
    monkeypatch.undo()

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trainer.model, "save_pretrained", no_space)
    with pytest.raises(OutputWriteError, match=rf"Saving the model to {folder} failed: the disk is full"):
        trainer.save_model(str(folder))
    words = tokenizer()
    monkeypatch.setattr(type(words), "save_pretrained", no_space)
    with pytest.raises(OutputWriteError, match=rf"Saving the tokenizer to {folder} failed: the disk is full"):
        save_tokenizer(words, folder)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "flag", ["per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"]
)
def test_batch_size_and_accumulation_below_one_are_refused(tmp_path, command, flag):
    with pytest.raises(SystemExit, match=rf"--{flag} must be >= 1, got 0\."):
        main(_command(command, tmp_path, f"--{flag}", "0"))


# Data files, numbers and names -------------------------------------------------------------------------------


def test_corpus_of_nul_bytes_names_the_file(tmp_path):
    zeros = tmp_path / "zeros.txt"
    zeros.write_bytes(bytes(5000))
    with pytest.raises(
        ValueError,
        match=rf"Corpus file {zeros} contains NUL bytes \(5000 of 5000 bytes, the first "
        r"at line 1, offset 0\): it is binary or zero-filled, not text",
    ):
        resolve_text_files([str(zeros)])
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"a first paragraph\nthen\x00a NUL\n")
    with pytest.raises(
        SystemExit, match=r"mixed.txt contains NUL bytes \(1 of 29 bytes, the first at line 2, offset 22\)"
    ):
        main(["pretrain", "--output_dir", str(tmp_path / "out"), "--corpus", str(mixed), *QUIET])


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--seed", "-1"], r"--seed must be in \[0, 2\*\*32 - 1\]"),
        (["--learning_rate", "-1"], "--learning_rate must be >= 0, got -1.0"),
        (["--output_dir", ""], "--output_dir is empty"),
    ],
)
def test_out_of_range_numbers_and_empty_output_dir_are_refused_before_any_model(flags, message, tmp_path):
    from compact_bert.cli.main import main

    arguments = ["distill", "embeddings", "--output_dir", str(tmp_path / "out"), *flags]
    with pytest.raises(SystemExit, match=message):
        main(arguments)


def test_an_opset_the_exporter_does_not_write_is_refused(tmp_path):
    pytest.importorskip("onnxruntime")
    from compact_bert.cli.main import main
    from compact_bert.export.onnx_exporter import optimum_available
    from tests.export.helpers import save_tiny_model

    if optimum_available():
        pytest.skip("Optimum's exporter honours old opsets; the check concerns torch.onnx (transformers 5)")
    save_tiny_model("minimoe", "feature-extraction", tmp_path / "model")
    with pytest.raises(SystemExit, match="--opset 13: the exporter wrote opset 18 instead"):
        main(
            [
                "export",
                "onnx",
                str(tmp_path / "model"),
                str(tmp_path / "onnx"),
                "--task",
                "feature-extraction",
                "--opset",
                "13",
            ]
        )
    assert not (tmp_path / "onnx" / "model.onnx").exists()


def test_a_missing_finetune_file_fails_before_distilling(tmp_path):
    from compact_bert.cli.main import main

    with pytest.raises(SystemExit, match=r"--finetune_train_file .*missing\.tsv does not exist or is not a file"):
        main(
            [
                "distill",
                "minimoe",
                "--output_dir",
                str(tmp_path / "out"),
                "--finetune_train_file",
                str(tmp_path / "missing.tsv"),
            ]
        )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_setting_the_labels_step_does_not_have_is_named_with_the_valid_ones(tmp_path):
    with pytest.raises(
        SystemExit, match=r"--finetune_settings: run_name is not a setting of the fine-tuning; valid: "
    ):
        main(["distill", "minimoe", "--output_dir", str(tmp_path / "run"), "--finetune_settings", '{"run_name": "x"}'])
    assert not (tmp_path / "run").exists()


def test_a_teacher_cache_dir_that_cannot_be_written_is_named_before_the_teacher_runs(tmp_path):
    """The teacher's logits were computed first and the write failed after them, in a traceback."""
    taken = tmp_path / "cache-file"
    taken.write_text("x")
    for value, message in ((str(taken), "is a file, not a folder"), ("/proc/compact-bert-cache", "cannot be created")):
        with pytest.raises(SystemExit, match=rf"--teacher_cache_dir {value} {message}"):
            main(
                [
                    "finetune",
                    "--model_name_or_path",
                    "minilm-3l-384h",
                    "--task_name",
                    "sst2",
                    "--train_file",
                    str(bundled_sst2_files()["train"]),
                    "--teacher_cache_dir",
                    value,
                    "--output_dir",
                    str(tmp_path / "run"),
                    *QUIET,
                ]
            )


@pytest.mark.parametrize("method", ["minimoe", "embeddings"])
def test_a_bogus_relation_kernel_variable_is_named_before_anything_is_built(tmp_path, monkeypatch, method):
    monkeypatch.setenv("COMPACT_BERT_RELATION_KERNEL", "bogus")
    with pytest.raises(SystemExit, match=r"\$COMPACT_BERT_RELATION_KERNEL='bogus' is not one of auto, native, eager"):
        main(["distill", method, "--output_dir", str(tmp_path / "run"), *QUIET])
    assert not (tmp_path / "run").exists()


def test_a_corpus_that_is_not_a_regular_file_is_named_as_such(tmp_path):
    with pytest.raises(SystemExit, match=r"Corpus file /dev/zero is not a regular file"):
        main(
            [
                "distill",
                "minimoe",
                "--corpus",
                "/dev/zero",
                "--finetune",
                "false",
                "--output_dir",
                str(tmp_path / "r"),
                *QUIET,
            ]
        )


def test_an_unloadable_dataset_name_in_finetune_is_one_line_naming_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(SystemExit, match=r"--dataset_name compact-bert-no-such/dataset: `datasets` cannot load it"):
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-384h",
                "--dataset_name",
                "compact-bert-no-such/dataset",
                "--output_dir",
                str(tmp_path / "run"),
                *QUIET,
            ]
        )


@pytest.mark.parametrize(
    ("name", "content", "found"),
    [
        ("train.tsv", "sentence\tlabel\ngood film\t1\n", "looks like a TSV table"),
        ("train.tsv.gz", "sentence\tlabel\ngood film\t1\n", "looks like a TSV table"),
        ("train.jsonl", '{"tokens": ["EU"], "ner_tags": ["B-ORG"]}\n', "looks like JSON"),
    ],
)
def test_ner_on_a_table_names_the_format_found_and_the_one_expected(tmp_path, name, content, found):
    """A table given to --task_name ner was read as CoNLL and failed on its header's 'tags'."""
    import gzip

    data = content.encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(SystemExit, match=rf"{found}.*NER reads CoNLL text: one 'token TAG' per line"):
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-384h",
                "--task_name",
                "ner",
                "--train_file",
                str(tmp_path / name),
                "--output_dir",
                str(tmp_path / "run"),
                *QUIET,
            ]
        )


def test_an_sts_table_named_txt_given_as_sentences_is_named_as_a_table(tmp_path):
    """Read as one sentence per line, it trained on its header and tab-joined rows."""
    table = tmp_path / "pairs.txt"
    table.write_text(
        "sentence1\tsentence2\tscore\nA man plays.\tSomeone plays.\t4.2\nA dog runs.\tA cat sleeps.\t0.4\n"
    )
    with pytest.raises(
        SystemExit, match=r"pairs\.txt is read as one sentence per line .*content is a tab-separated table"
    ):
        main(["distill", "embeddings", "--sentences", str(table), "--output_dir", str(tmp_path / "run"), *QUIET])


def test_an_output_dir_with_a_byte_that_is_not_utf8_is_refused_before_training(tmp_path):
    """tokenizers failed at the first checkpoint's save, leaving a checkpoint without tokenizer or manifest."""
    import os

    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/out\xff")
    with pytest.raises(SystemExit, match=r"--output_dir .* holds the byte b'\\xff', which is not UTF-8"):
        main(["distill", "minimoe", "--finetune", "false", "--output_dir", folder, *QUIET])


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--learning_rate", "nan"),
        ("--distillation_temperature", "inf"),
        ("--max_grad_norm", "inf"),
        ("--learning_rate_grid", "2e-5 inf"),
    ],
)
def test_a_number_flag_that_is_not_finite_is_refused_before_anything_is_built(tmp_path, capsys, flag, value):
    """argparse's float takes nan and inf; a training would only diverge on them after the expensive part."""
    files = bundled_sst2_files()
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--task_name", "sst2", "--output_dir", str(tmp_path)]
    argv += ["--train_file", str(files["train"]), "--validation_file", str(files["validation"])]
    with pytest.raises(SystemExit) as raised:
        main([*argv, flag, *value.split()])
    assert f"{flag} must be a finite number" in str(raised.value.code)
    assert not any(tmp_path.iterdir())


def test_copies_far_beyond_the_data_are_refused_saying_how_many_before_the_teacher_is_loaded(tmp_path):
    """``--augment_copies 1000000`` on 3,000 sentences would make 3 billion examples: refused with the count and what
    fits, before the teacher's logits or any copy is made."""
    from compact_bert.distillation.data import packaged_teacher_dir

    files = bundled_sst2_files()
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--task_name", "sst2", "--output_dir", str(tmp_path)]
    argv += ["--train_file", str(files["train"]), "--teacher", str(packaged_teacher_dir())]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--augment_copies", "1000000", "--teacher_cache_dir", str(tmp_path / "cache")])
    message = str(raised.value.code)
    assert "would make 3,000,003,000 training examples from 3,000" in message
    assert "give --augment_copies 3332 or fewer" in message
    assert not (tmp_path / "cache").exists()


def test_unlabeled_text_beyond_what_a_run_makes_is_refused_naming_the_file(tmp_path, monkeypatch):
    """The training data with ``--unlabeled_file`` over the examples a run makes: no number of copies would fit, so
    the message names the file and what to shrink, not a number of copies, before the teacher's logits are made."""
    import compact_bert.jobs.finetune as finetune_job
    from compact_bert.distillation.data import packaged_teacher_dir

    monkeypatch.setattr(finetune_job, "MAX_TRAINING_EXAMPLES", 3_100)  # the slice's 3,000 and 100 unlabeled
    files = bundled_sst2_files()
    sentences = files["train"].read_text(encoding="utf-8").splitlines()[1:201]
    unlabeled = tmp_path / "unlabeled.tsv"
    unlabeled.write_text("sentence\n" + "".join(line.split("\t")[0] + "\n" for line in sentences), encoding="utf-8")
    argv = [
        "finetune",
        "--model_name_or_path",
        "minilm-3l-96h",
        "--task_name",
        "sst2",
        "--output_dir",
        str(tmp_path / "out"),
    ]
    argv += ["--train_file", str(files["train"]), "--teacher", str(packaged_teacher_dir()), "--augment_copies", "0"]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--unlabeled_file", str(unlabeled), "--teacher_cache_dir", str(tmp_path / "cache")])
    message = str(raised.value.code)
    assert f"--unlabeled_file {unlabeled} (200) make more than the 3,100 examples a run makes" in message
    assert "give a smaller --unlabeled_file" in message
    assert not (tmp_path / "cache").exists()
