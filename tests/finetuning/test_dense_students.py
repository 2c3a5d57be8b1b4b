"""Dense students are their teacher's own transformers architecture: a RoBERTa teacher gives a RoBERTa student, a
classifier already fine-tuned for the task is the main job's teacher as it is, and nothing shipped carries code."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
import transformers

from compact_bert.cli.main import main
from compact_bert.configuration import preset_config
from compact_bert.distillation.data import packaged_teacher_dir
from compact_bert.finetuning.bundled_data import bundled_sst2_files
from compact_bert.finetuning.data import FinetuneDataArguments
from compact_bert.finetuning.folder_evaluation import evaluate_folder
from tests.remote_code_helpers import load_classifier_without_compact_bert

# Head size 32, as the packaged teacher's (a student keeps whole heads of its teacher).
TINY_STUDENT = {"hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128, "num_hidden_layers": 2}
QUICK = [
    "--max_train_samples",
    "32",
    "--max_eval_samples",
    "32",
    "--per_device_train_batch_size",
    "16",
    "--num_train_epochs",
    "1",
]


@pytest.fixture(scope="module")
def roberta_classifier(tmp_path_factory):
    """A small random RoBERTa already "fine-tuned" for SST-2: a sequence-classification head over SST-2's labels, its
    own tokenizer (bert-base-uncased's WordPiece, with the padding id its config names)."""
    folder = tmp_path_factory.mktemp("roberta") / "teacher"
    tokenizer = transformers.AutoTokenizer.from_pretrained(packaged_teacher_dir())
    config = transformers.RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=256,
        num_hidden_layers=4,
        max_position_embeddings=66,  # 64 tokens after RoBERTa's padding offset
        pad_token_id=tokenizer.pad_token_id,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    torch.manual_seed(0)
    transformers.RobertaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_dense_preset_is_the_teacher_architecture():
    bert = preset_config("minilm-3l-384h")
    assert type(bert) is transformers.BertConfig and not hasattr(bert, "num_experts")
    roberta = preset_config("minilm-3l-384h", teacher_config=transformers.RobertaConfig(vocab_size=1000))
    assert type(roberta) is transformers.RobertaConfig
    assert (roberta.vocab_size, roberta.pad_token_id, roberta.num_hidden_layers) == (1000, 1, 3)
    # a MiniMoE preset with one expert everywhere is a plain BERT; with experts it stays compact-bert's type
    assert type(preset_config("minimoe-3l-384h", num_experts=1)) is transformers.BertConfig
    assert preset_config("minimoe-3l-384h").model_type == "minimoe"
    with pytest.raises(ValueError, match="a student with experts starts from a MiniMoE preset"):
        preset_config("minilm-3l-384h", num_experts=4)
    with pytest.raises(ValueError, match="`capacity_factor` applies to mixture-of-experts blocks"):
        preset_config("minimoe-3l-384h", num_experts=1, capacity_factor=2.0)
    with pytest.raises(ValueError, match="divisible"):
        preset_config("minilm-3l-384h", num_attention_heads=7)


def test_a_roberta_classifier_is_the_main_jobs_teacher_as_it_is_and_its_students_are_roberta(
    roberta_classifier, tmp_path
):
    """``distill task --teacher <a fine-tuned RoBERTa classifier>``: the teacher is scored, not trained again (its
    folder untouched, its accuracy the teacher row); the student and the baseline are RoBERTa folders that start
    from its layers (task head included), carry no code and load without remote code in a process without
    compact-bert."""
    weights = roberta_classifier / "model.safetensors"
    before = _digest(weights)
    output = tmp_path / "job"
    overrides = json.dumps(TINY_STUDENT)
    argv = ["distill", "task", "--teacher", str(roberta_classifier), "--student_overrides", overrides]
    assert main([*argv, "--output_dir", str(output), *QUICK]) == 0
    summary = json.loads((output / "run_summary.json").read_text())
    comparison = summary["comparison"]
    assert comparison["teacher_fine_tuned_here"] is False
    assert comparison["folders"]["teacher"] == str(roberta_classifier.resolve())
    assert _digest(weights) == before and not (tmp_path / "job-teacher-sst2").exists()
    files = bundled_sst2_files()
    data = FinetuneDataArguments(
        task_name="sst2",
        train_file=str(files["train"]),
        validation_file=str(files["validation"]),
        max_seq_length=64,
        max_eval_samples=32,
    )
    assert comparison["sst2_accuracy"]["teacher"] == pytest.approx(
        evaluate_folder(roberta_classifier, data)["eval_accuracy"]
    )
    assert comparison["baseline"].startswith("the given teacher's layers 1, 3 ")
    student = tmp_path / "job-sst2"
    for folder in (student, tmp_path / "job-baseline-sst2"):
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "roberta" and "auto_map" not in config
        assert config["max_position_embeddings"] == 66 and config["pad_token_id"] == 0
        assert not list(folder.rglob("*.py"))
    record = json.loads((student / "run_summary.json").read_text())["teacher_initialization"]
    assert record["task_head"] == "copied" and record["hidden_channels"] == "top 64 of 128 by importance"
    # the student's position table keeps RoBERTa's rows before position 0, then the teacher's positions
    teacher = transformers.AutoModelForSequenceClassification.from_pretrained(roberta_classifier)
    untrained = transformers.AutoModelForSequenceClassification.from_config(
        transformers.AutoConfig.from_pretrained(student)
    )
    assert type(untrained).__name__ == "RobertaForSequenceClassification"
    assert teacher.roberta.embeddings.position_embeddings.weight.shape[0] == 66
    inputs = {
        "input_ids": torch.tensor([[101, 7592, 2088, 102]]),
        "attention_mask": torch.ones(1, 4, dtype=torch.long),
    }
    model = transformers.AutoModelForSequenceClassification.from_pretrained(student).eval()
    with torch.no_grad():
        torch.save({"inputs": inputs, "expected": model(**inputs).logits}, tmp_path / "reference.pt")
    load_classifier_without_compact_bert(student, tmp_path / "reference.pt", tmp_path)


def test_a_classifier_over_other_labels_is_refused_before_anything_trains(roberta_classifier, tmp_path):
    other = tmp_path / "other-labels"
    config = transformers.AutoConfig.from_pretrained(roberta_classifier)
    config.id2label, config.label2id = {0: "positive", 1: "negative"}, {"positive": 0, "negative": 1}
    transformers.AutoModelForSequenceClassification.from_pretrained(roberta_classifier, config=config).save_pretrained(
        other
    )
    transformers.AutoTokenizer.from_pretrained(roberta_classifier).save_pretrained(other)
    with pytest.raises(SystemExit) as raised:
        main(["distill", "task", "--teacher", str(other), "--output_dir", str(tmp_path / "job")])
    assert "differ from the data's" in str(raised.value.code) and "Give the pretrained encoder" in str(
        raised.value.code
    )
    assert not (tmp_path / "job-baseline-sst2").exists()


def test_finetune_with_a_teacher_trains_exactly_what_the_main_job_trains_its_student_with(tmp_path):
    """One recipe, one place: ``finetune --teacher`` with no training flag takes the task-distillation recipe's
    settings, and the main job (``jobs.distill_task``) gives its student the same arguments, built as typed values."""
    import dataclasses

    from compact_bert.cli.finetune_command import parse_finetune_arguments
    from compact_bert.finetuning.task_recipe import AUGMENT_COPIES, TRAINING_SETTINGS
    from compact_bert.jobs.distill_task import TaskDistillationSpec
    from compact_bert.jobs.finetune import FinetuneModelArguments
    from compact_bert.jobs.task_comparison import comparison_runs

    teacher = str(packaged_teacher_dir())
    files = bundled_sst2_files()
    user = [
        "--model_name_or_path",
        "minilm-3l-384h",
        "--teacher",
        teacher,
        "--task_name",
        "sst2",
        "--max_seq_length",
        "64",
        "--train_file",
        str(files["train"]),
        "--validation_file",
        str(files["validation"]),
        "--output_dir",
        str(tmp_path / "student"),
    ]
    _, _, by_hand = parse_finetune_arguments(user)
    for name, value in TRAINING_SETTINGS.items():
        if name == "group_by_length" and not hasattr(by_hand, name):  # transformers 5's spelling
            name, value = "train_sampling_strategy", "group_by_length"
        resolved = getattr(by_hand, name)
        assert getattr(resolved, "value", resolved) == value, name
    spec = TaskDistillationSpec(output_dir=str(tmp_path / "job"), student_output_dir=str(tmp_path / "student"))
    teacher_config = transformers.AutoConfig.from_pretrained(teacher)
    student_config = preset_config("minilm-3l-384h", teacher_config=teacher_config)
    runs = comparison_runs(
        FinetuneModelArguments(model_name_or_path="minilm-3l-384h"),
        student_config,
        teacher,
        teacher_config,
        spec.folders(),
        spec,
        spec.augment_copies,
        teacher_is_fine_tuned=False,
    )
    in_the_job = runs["student"].training
    differing = {
        field.name
        for field in dataclasses.fields(by_hand)
        if field.init and getattr(by_hand, field.name) != getattr(in_the_job, field.name)
    }
    # what the job adds beside the recipe: its logging cadence, its copies (the recipe's, resolved by the job rather
    # than by finetune), and the run settings every role inherits
    allowed = {"logging_strategy", "logging_steps", "logging_dir", "disable_tqdm", "report_to", "augment_copies"}
    assert differing <= allowed, differing
    assert spec.augment_copies is None and in_the_job.augment_copies == AUGMENT_COPIES  # the recipe's, resolved
