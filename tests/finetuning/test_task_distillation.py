"""Task distillation: the loss terms by hand, the cache of teacher logits, and ``finetune --teacher`` end to end —
a student taught by the teacher's soft targets agrees with the teacher more than one taught by the labels."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from compact_bert.cli import finetune_command
from compact_bert.cli.main import main
from compact_bert.distillation.losses import soft_target_loss, token_soft_target_loss
from compact_bert.distillation.teacher_cache import (
    TeacherCacheError,
    cached_teacher_outputs,
    data_fingerprint,
    teacher_fingerprint,
    tokenizer_fingerprint,
)
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.task_recipe import (
    AUGMENT_PAIR_RECOMBINED,
    DISTILLATION_ALPHA,
    LEARNING_RATE,
    REGRESSION_DISTILLATION_ALPHA,
)

TINY = '{"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}'
QUICK = [
    "--per_device_train_batch_size",
    "16",
    "--report_to",
    "none",
    "--eval_strategy",
    "no",
    "--save_strategy",
    "no",
    "--load_best_model_at_end",
    "false",
    "--dataloader_pin_memory",
    "false",
    "--disable_tqdm",
    "true",
    "--max_seq_length",
    "32",
    "--logging_strategy",
    "no",
]


def _softmax(values):
    exp = np.exp(values - values.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def test_soft_target_loss_by_hand():
    student = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]])
    teacher = np.array([[2.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    temperature = 2.0
    p, q = _softmax(teacher / temperature), _softmax(student / temperature)
    expected = (p * (np.log(p) - np.log(q))).sum(-1).mean() * temperature**2
    got = soft_target_loss(torch.tensor(student), torch.tensor(teacher), temperature)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    regression = soft_target_loss(torch.tensor([[0.5], [2.0]]), torch.tensor([[1.0], [1.0]]))
    assert regression.item() == pytest.approx((0.25 + 1.0) / 2)


def test_token_soft_target_loss_averages_real_tokens_only():
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 5, 4, generator=generator), torch.randn(2, 5, 4, generator=generator)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    per_token = [
        (
            _softmax(teacher[b, t].numpy())
            * (np.log(_softmax(teacher[b, t].numpy())) - np.log(_softmax(student[b, t].numpy())))
        ).sum()
        for b in range(2)
        for t in range(5)
        if mask[b, t]
    ]
    assert token_soft_target_loss(student, teacher, mask).item() == pytest.approx(float(np.mean(per_token)), rel=1e-5)
    changed = student.clone()
    changed[0, 3:] = 100.0  # padding: never read
    assert token_soft_target_loss(changed, teacher, mask).item() == pytest.approx(float(np.mean(per_token)), rel=1e-5)


def test_cache_fingerprints_change_with_each_input(tmp_path):
    from transformers import AutoModelForSequenceClassification, BertTokenizerFast

    from compact_bert.configuration import preset_config
    from compact_bert.distillation.data import default_tokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(preset_config("minilm-3l-96h", num_labels=2))
    base = teacher_fingerprint(model)
    with torch.no_grad():
        model.classifier.bias[0] += 1e-6
    assert teacher_fingerprint(model) != base
    tokenizer = default_tokenizer()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    assert tokenizer_fingerprint(BertTokenizerFast(vocab_file=str(vocab))) != tokenizer_fingerprint(tokenizer)
    data = [{"input_ids": [101, 7, 102], "attention_mask": [1, 1, 1]}]
    assert data_fingerprint(data) != data_fingerprint([{"input_ids": [101, 8, 102], "attention_mask": [1, 1, 1]}])
    calls = []

    def compute():
        calls.append(1)
        return {"logits": torch.arange(6.0).view(3, 2)}

    first = cached_teacher_outputs(compute, {"teacher": base, "max_length": 32}, tmp_path / "cache")
    second = cached_teacher_outputs(compute, {"teacher": base, "max_length": 32}, tmp_path / "cache")
    third = cached_teacher_outputs(compute, {"teacher": base, "max_length": 64}, tmp_path / "cache")
    assert (first.reused, second.reused, third.reused) == (False, True, False) and len(calls) == 2
    assert torch.equal(first.outputs["logits"], second.outputs["logits"]) and first.folder != third.folder


def test_an_interrupted_write_is_rebuilt_and_a_truncated_entry_refused(tmp_path):
    def interrupted():
        raise KeyboardInterrupt  # the teacher's pass stopped half-way

    with pytest.raises(KeyboardInterrupt):
        cached_teacher_outputs(interrupted, {"teacher": "t"}, tmp_path)
    assert not [path for path in tmp_path.iterdir() if not path.name.startswith(".")], "nothing is left as an entry"
    result = cached_teacher_outputs(lambda: {"logits": torch.ones(4, 2)}, {"teacher": "t"}, tmp_path)
    (result.folder / "manifest.json").unlink()  # a write killed before its manifest: never read as complete
    rebuilt = cached_teacher_outputs(lambda: {"logits": torch.zeros(4, 2)}, {"teacher": "t"}, tmp_path)
    assert not rebuilt.reused and torch.equal(rebuilt.outputs["logits"], torch.zeros(4, 2))
    tensors = rebuilt.folder / "outputs.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:-8])
    with pytest.raises(TeacherCacheError, match=r"outputs.safetensors does not match its manifest.*delete"):
        cached_teacher_outputs(lambda: {"logits": torch.zeros(4, 2)}, {"teacher": "t"}, tmp_path)


@pytest.fixture(scope="module")
def sst2_files(tmp_path_factory) -> dict[str, Path]:
    """400 training and 200 dev sentences of the bundled SST-2 slice."""
    folder = tmp_path_factory.mktemp("sst2")
    files = bundled_sst2_files()
    for split, rows in (("train", 400), ("validation", 200)):
        lines = files[split].read_text(encoding="utf-8").splitlines()
        (folder / f"{split}.tsv").write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    return {split: folder / f"{split}.tsv" for split in ("train", "validation")}


def _data(files) -> list[str]:
    return ["--task_name", "sst2", "--train_file", str(files["train"]), "--validation_file", str(files["validation"])]


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory, sst2_files) -> Path:
    """A tiny teacher whose predictions are not the data's labels: it was fine-tuned to tell long sentences (label 1)
    from short ones, a rule the students can learn only from the teacher."""
    folder = tmp_path_factory.mktemp("teacher")
    rows = [line.split("\t")[0] for line in sst2_files["train"].read_text(encoding="utf-8").splitlines()[1:]]
    median = sorted(len(row.split()) for row in rows)[len(rows) // 2]
    lengths = folder / "by_length.tsv"
    lengths.write_text("sentence\tlabel\n" + "".join(f"{row}\t{int(len(row.split()) > median)}\n" for row in rows))
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-96h",
                "--model_overrides",
                TINY,
                "--output_dir",
                str(folder),
                "--task_name",
                "sst2",
                "--train_file",
                str(lengths),
                "--validation_file",
                str(sst2_files["validation"]),
                *QUICK,
                "--num_train_epochs",
                "3",
                "--learning_rate",
                "2e-3",
            ]
        )
        == 0
    )
    return folder


def _predictions(folder: Path, files) -> torch.Tensor:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    sentences = [line.split("\t")[0] for line in files["validation"].read_text().splitlines()[1:]]
    with torch.no_grad():
        return model(
            **tokenizer(sentences, padding=True, truncation=True, max_length=32, return_tensors="pt")
        ).logits.argmax(-1)


def test_soft_targets_teach_the_teachers_predictions_better_than_labels(teacher_dir, sst2_files, tmp_path):
    student = [
        "--model_name_or_path",
        "minilm-3l-96h",
        "--model_overrides",
        TINY,
        "--init_from_teacher",
        "none",
        *_data(sst2_files),
        *QUICK,
        "--num_train_epochs",
        "3",
        "--learning_rate",
        "2e-3",
        "--group_by_length",  # both runs batch alike: only the teacher differs
        "false",
        "--seed",
        "3",
    ]
    cache = ["--teacher_cache_dir", str(tmp_path / "cache")]
    assert main(["finetune", *student, "--output_dir", str(tmp_path / "labels")]) == 0
    assert (
        main(
            [
                "finetune",
                *student,
                "--output_dir",
                str(tmp_path / "soft"),
                "--teacher",
                str(teacher_dir),
                "--distillation_alpha",
                "0",
                "--distillation_temperature",
                "1",
                *cache,
            ]
        )
        == 0
    )
    teacher = _predictions(teacher_dir, sst2_files)
    assert 0.02 < float(teacher.float().mean()) < 0.98, "the teacher must not predict one class"
    agreement = {
        name: float((_predictions(tmp_path / name, sst2_files) == teacher).float().mean())
        for name in ("labels", "soft")
    }
    assert agreement["soft"] > agreement["labels"], agreement
    summary = json.loads((tmp_path / "soft" / "run_summary.json").read_text())
    assert summary["task_distillation"]["teacher_logits_cache"]["reused"] is False
    # The same run again reads the cached logits and ends bitwise where the first did.
    assert (
        main(
            [
                "finetune",
                *student,
                "--output_dir",
                str(tmp_path / "again"),
                "--teacher",
                str(teacher_dir),
                "--distillation_alpha",
                "0",
                "--distillation_temperature",
                "1",
                *cache,
            ]
        )
        == 0
    )
    again = json.loads((tmp_path / "again" / "run_summary.json").read_text())
    assert again["task_distillation"]["teacher_logits_cache"]["reused"] is True
    from safetensors.torch import load_file

    first, second = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("soft", "again"))
    assert all(torch.equal(first[key], second[key]) for key in first)


def test_a_preset_starts_from_the_task_teacher_with_augmented_examples(teacher_dir, sst2_files, tmp_path):
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minimoe-3l-96h",
                "--model_overrides",
                '{"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64, '
                '"moe_intermediate_size": 16}',
                "--teacher",
                str(teacher_dir),
                "--augment_copies",
                "1",
                "--output_dir",
                str(tmp_path / "student"),
                *_data(sst2_files),
                *QUICK,
                "--max_steps",
                "2",
                "--teacher_cache_dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "student" / "run_summary.json").read_text())
    assert summary["learning_rate"] == LEARNING_RATE  # no --learning_rate: the task-distillation recipe's
    assert summary["task_distillation"]["alpha"] == DISTILLATION_ALPHA  # a classification: the recipe's
    assert "augment_pair_recombined" not in summary["task_distillation"]  # one text column: no pairs to recombine
    record = summary["teacher_initialization"]
    assert record["layer_map"] == [1] and record["task_head"] == "copied"  # the teacher's last of 2 layers
    assert record["layers"][0]["mode"] == "split" and record["layers"][0]["shared_neurons"] == 0
    config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert config["teacher_initialization"]["layer_map"] == [1] and config["capacity_factor"] is None
    card = (tmp_path / "student" / "README.md").read_text(encoding="utf-8")
    assert f"- Initialized from: `{teacher_dir.name}`, its layers 1 (0-based" in card
    experts = f"{config['num_experts']} experts of {config['moe_intermediate_size']} FFN neurons"
    assert config["num_hidden_layers"] == 1  # the one layer of the map, named in the singular
    assert f"as 1 layer of {config['hidden_size']} channels" in card and experts in card
    assert "Task distillation from the fine-tuned teacher" in card and "1 perturbed copies" in card


def test_a_pair_regression_student_trains_on_swapped_copies_and_records_them(sst2_files, tmp_path):
    """A cross-encoder teacher on sentence pairs (a regression: the length difference of the two sentences) teaches
    a student over copies that keep one sentence whole and trade places; the run records both settings."""
    rows = [line.split("\t")[0] for line in sst2_files["train"].read_text(encoding="utf-8").splitlines()[1:201]]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tscore\n"
        + "".join(
            f"{a}\t{b}\t{min(5, abs(len(a.split()) - len(b.split())) / 4):.2f}\n" for a, b in itertools.pairwise(rows)
        )
    )
    common = ["--task_name", "stsb", "--train_file", str(pairs), "--validation_file", str(pairs), *QUICK]
    teacher = tmp_path / "teacher"
    flags = ["--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY, "--max_steps", "4"]
    assert main(["finetune", *flags, "--output_dir", str(teacher), *common]) == 0
    student = tmp_path / "student"
    distill = ["--teacher", str(teacher), "--augment_copies", "2", "--augment_pair_swap", "true"]
    assert main(["finetune", *flags, "--output_dir", str(student), *common, *distill]) == 0
    record = json.loads((student / "run_summary.json").read_text())["task_distillation"]
    assert (record["augment_copies"], record["augment_pair_sentences"], record["augment_pair_swap"]) == (
        2,
        "one",
        True,
    )
    assert record["alpha"] == REGRESSION_DISTILLATION_ALPHA != DISTILLATION_ALPHA  # the recipe's for a regression
    card = (student / "README.md").read_text(encoding="utf-8")
    assert "2 perturbed copies of every example labelled by the teacher, each copied pair read in either order" in card
    given = tmp_path / "given-alpha"
    assert (
        main(["finetune", *flags, "--output_dir", str(given), *common, *distill, "--distillation_alpha", "0.25"]) == 0
    )
    assert json.loads((given / "run_summary.json").read_text())["task_distillation"]["alpha"] == 0.25
    assert record["augment_pair_recombined"] == AUGMENT_PAIR_RECOMBINED  # the recipe's for a pair task


def test_a_pair_student_trains_on_recombined_pairs_and_records_them(sst2_files, tmp_path):
    """``--augment_pair_recombined 2``: the transfer set gains pairs made of the training set's own sentences, the
    teacher labels them (its logits are cached for every one), and the run summary and the model card say so."""
    rows = [line.split("\t")[0] for line in sst2_files["train"].read_text(encoding="utf-8").splitlines()[1:161]]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{len(a.split()) % 6}\n" for a, b in zip(rows, rows[80:]))
    )
    common = ["--task_name", "stsb", "--train_file", str(pairs), "--validation_file", str(pairs), *QUICK]
    teacher = tmp_path / "teacher"
    flags = ["--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY, "--num_train_epochs", "1"]
    assert main(["finetune", *flags, "--max_steps", "2", "--output_dir", str(teacher), *common]) == 0
    steps = {}
    for recombined in ("0", "2"):
        student = tmp_path / f"student-{recombined}"
        distill = ["--teacher", str(teacher), "--augment_copies", "0", "--augment_pair_recombined", recombined]
        assert main(["finetune", *flags, "--output_dir", str(student), *common, *distill]) == 0
        summary = json.loads((student / "run_summary.json").read_text())
        assert summary["task_distillation"]["augment_pair_recombined"] == int(recombined)
        steps[recombined] = summary["optimizer_steps"]
    # 80 pairs in batches of 16: 5 steps; with up to 2 new pairs per pair, more (none made up where none share a word)
    assert steps["0"] == 5 and 5 < steps["2"] <= 15
    card = (tmp_path / "student-2" / "README.md").read_text(encoding="utf-8")
    assert "and up to 2 new pairs per training pair (its first sentence with the training sentences closest" in card
    assert "new pairs per training pair" not in (tmp_path / "student-0" / "README.md").read_text(encoding="utf-8")


def test_the_trainer_takes_the_recipes_alpha_for_its_heads_kind_when_none_is_set(tmp_path):
    """Arguments built in Python and handed to the trainer directly (not through ``finetune``) leave alpha unset:
    the trainer takes the recipe's for a regression head or a classification head; a set alpha stands."""
    from transformers import BertConfig, BertForSequenceClassification

    from compact_bert.finetuning.finetune_config import FinetuneConfig
    from compact_bert.finetuning.task_distillation import TaskDistillationTrainer

    tiny = {
        "vocab_size": 64,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }
    args = FinetuneConfig(
        output_dir=str(tmp_path), report_to="none", use_cpu=True, eval_strategy="no", save_strategy="no"
    )
    assert args.distillation_alpha is None
    for labels, expected in ((1, REGRESSION_DISTILLATION_ALPHA), (2, DISTILLATION_ALPHA)):
        model = BertForSequenceClassification(BertConfig(**tiny, num_labels=labels))
        assert TaskDistillationTrainer(model=model, args=args).distillation_alpha == expected
    args = FinetuneConfig(
        output_dir=str(tmp_path),
        report_to="none",
        use_cpu=True,
        eval_strategy="no",
        save_strategy="no",
        distillation_alpha=0.3,
    )
    model = BertForSequenceClassification(BertConfig(**tiny, num_labels=1))
    assert TaskDistillationTrainer(model=model, args=args).distillation_alpha == 0.3


def test_the_learning_rate_is_the_recipes_with_a_teacher_unless_given(tmp_path):
    """With --teacher the student trains at the recipe's rate; a rate on the command line (either spelling) wins,
    and without a teacher the fine-tuning default stands."""
    base = ["--model_name_or_path", "minilm-3l-384h", "--output_dir", str(tmp_path / "out")]
    base += ["--train_file", str(bundled_sst2_files()["train"])]
    with_teacher = [*base, "--teacher", str(tmp_path / "teacher")]

    def rate(argv):
        return finetune_command.parse_finetune_arguments(argv)[2].learning_rate

    assert LEARNING_RATE != 2e-5 and rate(with_teacher) == LEARNING_RATE
    assert rate([*with_teacher, "--learning_rate", "3e-5"]) == 3e-5
    assert rate([*with_teacher, "--learning_rate=4e-5"]) == 4e-5
    assert rate(base) == 2e-5


def _fails(argv, capsys) -> str:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    return str(raised.value.code) + capsys.readouterr().err


def _tiny_student_command(files, output_dir: Path) -> list[str]:
    """``finetune`` of the tiny preset on ``files`` into ``output_dir``, the quick settings: what the early-error
    tests add one bad input to."""
    model = ["--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY]
    return ["finetune", *model, *_data(files), *QUICK, "--output_dir", str(output_dir)]


def test_bad_teachers_fail_before_training(teacher_dir, sst2_files, tmp_path, capsys):
    from transformers import AutoConfig, AutoModel

    common = _tiny_student_command(sst2_files, tmp_path / "out")
    base = tmp_path / "base"
    AutoModel.from_pretrained(teacher_dir).save_pretrained(base)
    assert "without a *ForSequenceClassification head" in _fails([*common, "--teacher", str(base)], capsys)
    relabelled = tmp_path / "relabelled"
    config = AutoConfig.from_pretrained(teacher_dir)
    config.id2label, config.label2id = {0: "positive", 1: "negative"}, {"positive": 0, "negative": 1}  # swapped
    from transformers import AutoModelForSequenceClassification

    AutoModelForSequenceClassification.from_pretrained(teacher_dir, config=config).save_pretrained(relabelled)
    assert "differ from the data's" in _fails([*common, "--teacher", str(relabelled)], capsys)
    other_vocab = tmp_path / "other_vocab"
    AutoModelForSequenceClassification.from_pretrained(teacher_dir).save_pretrained(other_vocab)
    from transformers import AutoTokenizer, BertTokenizerFast

    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]) + "\n")
    BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt")).save_pretrained(other_vocab)
    # A preset reads its teacher's tokenizer: a teacher folder whose tokenizer does not fit its own vocabulary is
    # named; a student folder with its own tokenizer is checked against the teacher's.
    assert re.search(  # the tokenizer's size differs between transformers lines (5 or 6 tokens)
        r"has a tokenizer of \d tokens but a vocab_size of 30522",
        _fails([*common, "--teacher", str(other_vocab)], capsys),
    )
    student = tmp_path / "student"
    AutoModelForSequenceClassification.from_pretrained(teacher_dir).save_pretrained(student)
    AutoTokenizer.from_pretrained(teacher_dir).save_pretrained(student)
    folder_student = ["finetune", "--model_name_or_path", str(student), *common[5:]]
    assert "is not the student's" in _fails([*folder_student, "--teacher", str(other_vocab)], capsys)
    assert "out of range" in _fails([*common, "--teacher", str(teacher_dir), "--layer_map", "0,7"], capsys)
    assert "hidden_size 64 is larger" in _fails(
        [
            *common,
            "--teacher",
            str(teacher_dir),
            "--init_from_teacher",
            str(teacher_dir),
            "--model_overrides",
            '{"num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 8}',
        ],
        capsys,
    )
    assert not (tmp_path / "out" / "model.safetensors").exists()
    assert math.isfinite(1.0)


def test_a_teacher_saved_with_glue_label_ids_still_teaches_named_labels(teacher_dir, tmp_path):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from compact_bert.distillation.data import default_tokenizer
    from compact_bert.finetuning.data import GLUE_TASKS
    from compact_bert.finetuning.task_distillation import load_task_teacher

    older = tmp_path / "older"  # fine-tuned before label ids got their task's names
    config = AutoConfig.from_pretrained(teacher_dir)
    config.id2label, config.label2id = {0: "0", 1: "1"}, {"0": 0, "1": 1}
    AutoModelForSequenceClassification.from_pretrained(teacher_dir, config=config).save_pretrained(older)
    default_tokenizer().save_pretrained(older)
    names = ["negative", "positive"]
    assert load_task_teacher(str(older), "classification", names, default_tokenizer(), GLUE_TASKS["sst2"]) is not None
    with pytest.raises(Exception, match="differ from the data's"):  # without the task, ids are not names
        load_task_teacher(str(older), "classification", names, default_tokenizer())


def test_unlabeled_sentences_join_the_transfer_set_with_the_teachers_logits(teacher_dir, sst2_files, tmp_path):
    """``--unlabeled_file``: sentences without labels join the transfer set after the training sentences, each with
    the teacher's own logits (the cached logits equal the teacher's predictions on the sentences, in order); a label
    column in the file is ignored; the run summary and the card count them."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    lines = sst2_files["train"].read_text(encoding="utf-8").splitlines()
    labelled = tmp_path / "labelled.tsv"
    labelled.write_text("\n".join(lines[:41]) + "\n", encoding="utf-8")
    unlabeled = tmp_path / "unlabeled.tsv"
    unlabeled.write_text(
        "label\tsentence\n" + "".join(f"unused\t{line.split(chr(9))[0]}\n" for line in lines[41:401]), encoding="utf-8"
    )
    student = tmp_path / "student"
    flags = ["--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY, "--output_dir", str(student)]
    data = ["--task_name", "sst2", "--train_file", str(labelled), "--validation_file", str(sst2_files["validation"])]
    distillation = ["--teacher", str(teacher_dir), "--augment_copies", "0", "--unlabeled_file", str(unlabeled)]
    cache = ["--teacher_cache_dir", str(tmp_path / "cache")]
    assert main(["finetune", *flags, *data, *QUICK, "--max_steps", "2", *distillation, *cache]) == 0
    record = json.loads((student / "run_summary.json").read_text())["task_distillation"]
    assert record["unlabeled_examples"] == 360
    cached = load_file(str(Path(record["teacher_logits_cache"]["folder"]) / "outputs.safetensors"))["logits"]
    sentences = [line.split("\t")[0] for line in lines[1:401]]  # the training sentences, then the unlabeled ones
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir)
    teacher = AutoModelForSequenceClassification.from_pretrained(teacher_dir).eval()
    with torch.no_grad():
        expected = teacher(**tokenizer(sentences, padding=True, truncation=True, max_length=32, return_tensors="pt"))
    assert cached.shape == (400, 2)
    torch.testing.assert_close(cached, expected.logits, atol=1e-4, rtol=1e-4)
    card = (student / "README.md").read_text(encoding="utf-8")
    over = "over the training set and 360 unlabeled in-domain examples labelled by the teacher (`unlabeled.tsv`)"
    assert over in card


def test_unlabeled_files_fail_early_and_say_what_is_wrong(teacher_dir, sst2_files, tmp_path, capsys):
    common = _tiny_student_command(sst2_files, tmp_path / "out")
    texts = tmp_path / "texts.tsv"
    texts.write_text("sentence\na fine film\n", encoding="utf-8")
    assert "give --teacher" in _fails([*common, "--unlabeled_file", str(texts)], capsys)
    wrong = tmp_path / "wrong.tsv"
    wrong.write_text("text\na fine film\n", encoding="utf-8")
    message = _fails([*common, "--teacher", str(teacher_dir), "--unlabeled_file", str(wrong)], capsys)
    assert f"--unlabeled_file: {wrong} has no column 'sentence'; its columns: ['text']" in message
    empty = tmp_path / "empty.tsv"
    empty.write_text("sentence\na fine film\n \n", encoding="utf-8")
    message = _fails([*common, "--teacher", str(teacher_dir), "--unlabeled_file", str(empty)], capsys)
    assert f"{empty}:3: column 'sentence' holds ' ', not a non-empty text" in message
    missing = tmp_path / "missing.tsv"
    assert f"--unlabeled_file: {missing} does not exist" in _fails(
        [*common, "--teacher", str(teacher_dir), "--unlabeled_file", str(missing)], capsys
    )
    assert not (tmp_path / "out" / "model.safetensors").exists()
