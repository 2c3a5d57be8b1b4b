"""Intermediate-layer distillation in the task stage: the layer map, the losses by hand, and ``finetune --teacher
--distillation_hidden_weight`` / ``--distillation_attention_weight`` end to end on a tagging task with augmented
copies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

from compact_bert.cli.main import main
from compact_bert.configuration import preset_config
from compact_bert.finetuning.intermediate_distillation import (
    attention_distillation_loss,
    intermediate_distillation_loss,
    task_layer_map,
)

TINY = '{"num_hidden_layers": 4, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}'
QUICK = [
    "--task_name",
    "ner",
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
]


def test_the_layer_map_is_the_one_the_student_started_from_else_uniform():
    config = preset_config("minilm-3l-96h")
    assert task_layer_map(config, 6) == [2, 4, 6]  # TinyBERT's g(m) = m * N / M, 1-based
    config.teacher_initialization = {"layer_map": [0, 2, 5]}
    assert task_layer_map(config, 6) == [1, 3, 6]
    assert task_layer_map(config, 4) == [1, 3, 4]  # recorded for a deeper teacher: does not fit, uniform
    config.teacher_initialization = {"layer_map": [0, 1]}  # not one entry per layer
    assert task_layer_map(config, 6) == [2, 4, 6]


def test_the_loss_by_hand_over_real_tokens_and_through_relations_across_widths():
    generator = torch.Generator().manual_seed(0)
    teacher = tuple(torch.randn(2, 5, 8, generator=generator) for _ in range(5))  # embeddings + 4 layers
    student = tuple(torch.randn(2, 5, 8, generator=generator) for _ in range(3))  # embeddings + 2 layers
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    real = mask.bool()
    by_hand = torch.stack(
        [((s - t).pow(2).mean(-1))[real].mean() for s, t in zip(student, (teacher[0], teacher[2], teacher[4]))]
    ).mean()
    loss = intermediate_distillation_loss(student, teacher, [2, 4], mask)
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-6)
    padded = tuple(state.clone() for state in student)
    for state in padded:
        state[0, 3:] = 1e3  # padding does not count
    assert intermediate_distillation_loss(padded, teacher, [2, 4], mask).item() == pytest.approx(loss.item(), rel=1e-6)
    # a wider teacher whose states are the student's, rotated and zero-padded: the relations are the same
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=generator))
    wider = tuple(torch.nn.functional.pad(state @ rotation, (0, 8)) for state in student)
    assert intermediate_distillation_loss(student, (wider[0], wider[1], wider[2]), [1, 2], mask).item() < 1e-10
    with pytest.raises(ValueError, match="hidden states for 3 layers"):
        intermediate_distillation_loss(student, teacher, [1, 2, 3], mask)


def test_the_attention_loss_by_hand_is_the_kl_of_each_student_layer_to_its_teacher_layer():
    generator = torch.Generator().manual_seed(0)

    def attention(layers: int) -> tuple[torch.Tensor, ...]:
        scores = torch.randn(layers, 2, 3, 5, 5, generator=generator)
        scores[..., 3:] = -1e4  # keys 3 and 4 are padding in every row
        return tuple(scores.softmax(-1))

    teacher, student = attention(4), attention(2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    real = mask.bool()

    def kl(target, approximation):  # per query row, averaged over heads, then over real query tokens
        rows = (target * (target.clamp(min=1e-12).log() - approximation.clamp(min=1e-12).log())).sum(-1)
        return rows.mean(1)[real].mean()

    by_hand = (kl(teacher[1], student[0]) + kl(teacher[3], student[1])) / 2
    loss = attention_distillation_loss(student, teacher, [2, 4], mask)
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert attention_distillation_loss((teacher[1], teacher[3]), teacher, [2, 4], mask).item() < 1e-6
    with pytest.raises(ValueError, match="2 attention maps for 3 layers"):
        attention_distillation_loss(student, teacher, [1, 2, 3], mask)


PEOPLE = ["Alice", "Bruno", "Chen", "Dmitri", "Esther", "Farid", "Greta", "Hiro"]
PLACES = ["Paris", "Lagos", "Lima", "Oslo", "Kyoto", "Quito", "Accra", "Perth"]
VERBS = ["visited", "left", "loved", "reached", "painted", "described"]


def _conll(path: Path, sentences: int, seed: int) -> Path:
    rng = random.Random(seed)
    blocks = []
    for _ in range(sentences):
        rows = [f"{rng.choice(PEOPLE)} B-PER", f"{rng.choice(VERBS)} O", f"{rng.choice(PLACES)} B-LOC", ". O"]
        if rng.random() < 0.5:
            rows[1:1] = ["quietly O"]
        blocks.append("\n".join(rows))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ner_teacher(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("ner")
    files = {"train": _conll(folder / "train.txt", 96, 0), "validation": _conll(folder / "dev.txt", 32, 1)}
    teacher = folder / "teacher"
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY]
    data = ["--train_file", str(files["train"]), "--validation_file", str(files["validation"])]
    assert (
        main(
            [*argv, "--output_dir", str(teacher), *data, *QUICK, "--num_train_epochs", "4", "--learning_rate", "2e-3"]
        )
        == 0
    )
    return teacher, files


def _student(tmp_path, teacher: Path, files, weight: str, name: str, *flags: str) -> Path:
    output = tmp_path / name
    assert (
        main(
            [
                "finetune",
                "--model_name_or_path",
                "minilm-3l-96h",
                "--model_overrides",
                TINY.replace('"num_hidden_layers": 4', '"num_hidden_layers": 2'),
                "--teacher",
                str(teacher),
                "--augment_copies",
                "1",
                "--distillation_hidden_weight",
                weight,
                "--train_file",
                str(files["train"]),
                "--validation_file",
                str(files["validation"]),
                *QUICK,
                "--num_train_epochs",
                "2",
                "--learning_rate",
                "1e-3",
                "--logging_strategy",
                "steps",
                "--logging_steps",
                "1",
                "--output_dir",
                str(output),
                "--teacher_cache_dir",
                str(tmp_path / "cache"),
                *flags,
            ]
        )
        == 0
    )
    return output


def _losses_on(folder: Path, teacher: Path, sentences: list[list[str]]) -> tuple[float, float]:
    """The student's hidden-state and attention losses against the teacher on ``sentences``."""
    tokenizer = AutoTokenizer.from_pretrained(teacher)
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    models = [AutoModelForTokenClassification.from_pretrained(path).eval() for path in (folder, teacher)]
    for model in models:  # both are transformers models on SDPA by default: their probabilities need eager
        model.set_attn_implementation("eager")
    with torch.no_grad():
        student, reference = (model(**batch, output_hidden_states=True, output_attentions=True) for model in models)
    layer_map = task_layer_map(models[0].config, models[1].config.num_hidden_layers)
    mask = batch["attention_mask"]
    return (
        intermediate_distillation_loss(student.hidden_states, reference.hidden_states, layer_map, mask).item(),
        attention_distillation_loss(student.attentions, reference.attentions, layer_map, mask).item(),
    )


def _dev_sentences(files) -> list[list[str]]:
    words = [line.split()[0] for line in files["validation"].read_text().splitlines() if line.strip()]
    return [words[start : start + 4] for start in range(0, 64, 4)]


def test_a_tagging_student_learns_the_teachers_hidden_states_over_augmented_copies(ner_teacher, tmp_path):
    teacher, files = ner_teacher
    distilled = _student(tmp_path, teacher, files, "1", "hidden")
    summary = json.loads((distilled / "run_summary.json").read_text())
    assert summary["task_distillation"]["hidden_weight"] == 1.0 and summary["task_distillation"]["augment_copies"] == 1
    assert summary["teacher_initialization"]["layer_map"] == [1, 3]
    card = (distilled / "README.md").read_text(encoding="utf-8")
    assert "its hidden states taught to the student's layers with weight 1.0" in card
    history = json.loads((distilled / "trainer_state.json").read_text())["log_history"]
    hidden = [entry["hidden_loss"] for entry in history if "hidden_loss" in entry]
    steps = [entry for entry in history if "loss" in entry and "hidden_loss" in entry]
    # 96 sentences and their 96 copies, 16 a step, 2 epochs: every step ran the teacher
    assert len(hidden) == len(steps) == summary["optimizer_steps"] == 24
    plain = _student(tmp_path, teacher, files, "0", "plain")
    plain_history = json.loads((plain / "trainer_state.json").read_text())["log_history"]
    assert not any("hidden_loss" in entry for entry in plain_history)  # the teacher is not run for it
    dev = _dev_sentences(files)
    assert _losses_on(distilled, teacher, dev)[0] < 0.8 * _losses_on(plain, teacher, dev)[0]
    attending = _student(
        tmp_path,
        teacher,
        files,
        "0",
        "attention",
        "--distillation_attention_weight",
        "1",
        "--augment_word_neighbours",
        "5",
    )
    summary = json.loads((attending / "run_summary.json").read_text())
    assert summary["task_distillation"]["attention_weight"] == 1.0
    assert summary["task_distillation"]["augment_word_neighbours"] == 5
    card = (attending / "README.md").read_text(encoding="utf-8")
    assert "its attention taught to the student's layers with weight 1.0" in card
    assert "replaced by one of their 5 nearest neighbours in the teacher's word embeddings" in card
    # other copies than the plain student's: the teacher labelled another transfer set
    caches = {
        json.loads((folder / "run_summary.json").read_text())["task_distillation"]["teacher_logits_cache"]["folder"]
        for folder in (plain, attending)
    }
    assert len(caches) == 2
    history = json.loads((attending / "trainer_state.json").read_text())["log_history"]
    assert len([entry for entry in history if "attention_loss" in entry]) == 24
    assert not any("hidden_loss" in entry for entry in history)  # β = 0: the attention loss alone
    assert _losses_on(attending, teacher, dev)[1] < 0.8 * _losses_on(plain, teacher, dev)[1]


def test_the_attention_loss_refuses_a_student_with_other_head_counts_before_training(ner_teacher, tmp_path):
    teacher, files = ner_teacher
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--model_overrides"]
    overrides = TINY.replace('"num_attention_heads": 4', '"num_attention_heads": 2')
    data = ["--train_file", str(files["train"]), "--validation_file", str(files["validation"]), *QUICK]
    flags = ["--teacher", str(teacher), "--distillation_attention_weight", "0.5", "--output_dir", str(tmp_path / "s")]
    with pytest.raises(SystemExit, match="the student has 2 heads, the teacher .* 4"):
        main([*argv, overrides, *data, *flags])
    assert not (tmp_path / "s" / "model.safetensors").exists()


def test_distillation_flags_that_would_be_ignored_are_refused_before_training(ner_teacher, tmp_path):
    teacher, files = ner_teacher
    argv = ["finetune", "--model_name_or_path", "minilm-3l-96h", "--model_overrides", TINY]
    data = ["--train_file", str(files["train"]), "--validation_file", str(files["validation"]), *QUICK]
    out = ["--output_dir", str(tmp_path / "never")]
    for flag in ("--distillation_attention_weight", "--distillation_hidden_weight", "--augment_word_neighbours"):
        with pytest.raises(SystemExit, match=f"{flag}: it distills from a fine-tuned teacher, and none was given"):
            main([*argv, *data, *out, flag, "1"])
    for flag, value in (
        ("--distillation_alpha", "0.3"),
        ("--distillation_temperature", "4"),
        ("--distillation_alpha", "0"),
    ):
        with pytest.raises(
            SystemExit, match=f"{flag}: it weighs or softens a teacher's predictions, and no --teacher"
        ):
            main([*argv, *data, *out, f"{flag}={value}"])
    with pytest.raises(SystemExit, match="--augment_word_neighbours 5: .* --augment_copies is 0"):
        main(
            [*argv, *data, *out, "--teacher", str(teacher), "--augment_copies", "0", "--augment_word_neighbours", "5"]
        )
    swap = [*argv, *data, *out, "--teacher", str(teacher), "--augment_pair_swap", "true"]
    with pytest.raises(SystemExit, match="--augment_pair_swap: .* --augment_copies is 0"):
        main([*swap, "--augment_copies", "0"])
    with pytest.raises(SystemExit, match=r"--augment_pair_swap: the task's text is one column \(.+\), not a sentence"):
        main([*swap, "--augment_copies", "1"])  # tagging: one column of words
    recombined = [*argv, *data, *out, "--augment_pair_recombined", "2"]
    with pytest.raises(SystemExit, match="--augment_pair_recombined 2: recombined pairs are labelled by a teacher"):
        main(recombined)
    with pytest.raises(SystemExit, match=r"--augment_pair_recombined 2: the task's text is one column \(.+\), not a"):
        main([*recombined, "--teacher", str(teacher)])
    assert not (tmp_path / "never" / "model.safetensors").exists()
