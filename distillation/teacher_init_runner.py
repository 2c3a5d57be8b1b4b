"""What the commands call to start a student from its teacher: calibration data, the decision, the record.

``initialization_blocker`` says why a student cannot start from a teacher (``None`` when it can), so that
``--init_from_teacher auto`` initializes wherever the shapes allow and says why not elsewhere.
``initialize_student`` measures the teacher's activations when the student needs them, copies the weights
(``teacher_init.initialize_from_teacher``), prints the mapping and writes it into the student's config.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import torch

from .data import portable_model_name
from .importance import measure_teacher_activations
from .teacher_init import (
    INITIALIZABLE_MODEL_TYPES,
    check_teacher_shapes,
    initialize_from_teacher,
    needs_activation_statistics,
    parse_layer_map,
)
from .teacher_weights import TeacherShapeError, read_encoder_weights

__all__ = [
    "CALIBRATION_EXAMPLES",
    "calibration_batches",
    "initialization_blocker",
    "initialize_student",
    "prepare_initialization",
    "start_from_teacher",
    "summarize_record",
    "teacher_statistics",
]

logger = logging.getLogger(__name__)

# Examples (or corpus blocks) the importance and router statistics average over: a few hundred, as Minitron's
# calibration set (1,024 samples for LLMs; our encoders are far smaller).
CALIBRATION_EXAMPLES = 256
_INPUT_COLUMNS = ("input_ids", "token_type_ids", "attention_mask")


def calibration_batches(dataset, collator, limit: int = CALIBRATION_EXAMPLES, batch_size: int = 32) -> list[dict]:
    """The first ``limit`` examples of a tokenized dataset (a streaming one too), collated into batches of model
    inputs."""
    features = []
    for example in dataset:
        if len(features) == limit:
            break
        features.append({name: example[name] for name in _INPUT_COLUMNS if name in example})
    batches = []
    for start in range(0, len(features), batch_size):
        batch = collator(features[start : start + batch_size])
        if "attention_mask" not in batch:
            batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        batches.append({name: batch[name] for name in _INPUT_COLUMNS if name in batch})
    return batches


def initialization_blocker(student_config, teacher) -> str | None:
    """Why ``teacher`` cannot initialize a student of ``student_config``, or ``None`` when it can."""
    if getattr(student_config, "model_type", None) not in INITIALIZABLE_MODEL_TYPES:
        return f"model_type {student_config.model_type!r} students are not initialized from a teacher"
    try:
        check_teacher_shapes(student_config, read_encoder_weights(teacher))
    except TeacherShapeError as error:
        return str(error)
    return None


def teacher_statistics(student_config, teacher, calibration: Iterable[dict] | None):
    """The teacher's activation statistics when a student of ``student_config`` needs them, else ``None``."""
    if not needs_activation_statistics(student_config, teacher.config):
        return None
    if calibration is None:
        raise TeacherShapeError("Initializing this student needs calibration text for the teacher's activations.")
    return measure_teacher_activations(teacher, calibration)


def initialize_student(
    student, teacher, layer_map: str | None, statistics, calibration, seed: int, teacher_name: str
) -> dict:
    """Initialize ``student`` from ``teacher`` (``statistics`` from ``teacher_statistics``, ``calibration`` batches
    for the routers); print the record and store it as ``config.teacher_initialization``."""
    record = initialize_from_teacher(
        student,
        teacher,
        layer_map=layer_map,
        statistics=statistics,
        calibration=calibration,
        seed=seed,
        teacher_name=teacher_name,
    )
    # The config is pushed with the model: it names the teacher portably; the returned record, which the run summary
    # keeps (local, never pushed), keeps the path the card follows to the teacher's own card.
    student.config.teacher_initialization = {**record, "teacher": portable_model_name(str(record["teacher"]))}
    print("Student initialized from its teacher: " + json.dumps(summarize_record(record)))
    return record


def summarize_record(record: dict) -> dict:
    """The record in one line: layer map, width, experts and task head."""
    modes = sorted({layer["mode"] for layer in record["layers"]})
    first = record["layers"][0]
    experts = {key: first[key] for key in ("experts", "expert_width", "shared_neurons") if key in first}
    return {
        "teacher": record["teacher"],
        "layer_map": record["layer_map"],
        "hidden_channels": record["hidden_channels"],
        "heads": "all" if all(layer["heads"] == "all" for layer in record["layers"]) else "top by importance",
        "ffn_neurons": first["ffn_neurons"],
        "ffn": "/".join(modes),
        **experts,
        "task_head": record.get("task_head"),
    }


def prepare_initialization(student_config, teacher, layer_map, dataset, collator):
    """What every student initialized from ``teacher`` needs, checked and measured once before any training: the
    layer map (a bad one is a ``RunSettingsError`` naming ``--layer_map``), calibration batches from ``dataset`` and
    the teacher's activation statistics where the student needs them. Returns ``(statistics, calibration)``."""
    from ..training.run_errors import RunSettingsError

    try:
        parse_layer_map(layer_map, teacher.config.num_hidden_layers, student_config.num_hidden_layers)
    except TeacherShapeError as error:
        raise RunSettingsError(f"--layer_map: {error}") from None
    calibration = calibration_batches(dataset, collator)
    if needs_activation_statistics(student_config, teacher.config):
        print(
            f"Measuring the teacher's channel, head and neuron importance on {CALIBRATION_EXAMPLES} training "
            "examples ...",
            flush=True,
        )
    return teacher_statistics(student_config, teacher, calibration), calibration


def start_from_teacher(
    student, teacher, teacher_name: str, choice: str, layer_map, blocks, tokenizer, seed: int
) -> dict | None:
    """``--init_from_teacher`` of the distillation commands: ``auto`` initializes ``student`` from ``teacher``
    wherever the shapes allow (saying why not elsewhere), ``none`` keeps the random initialization. Calibration text:
    the first blocks of the training corpus."""
    from transformers import DataCollatorWithPadding

    from ..training.run_errors import RunSettingsError

    if choice not in ("auto", "none"):
        raise RunSettingsError(f"--init_from_teacher must be 'auto' or 'none' here, got {choice!r}.")
    if choice == "none":
        return None
    blocker = initialization_blocker(student.config, teacher)
    if blocker is not None:
        print(f"The student starts from random weights, not from its teacher: {blocker}")
        return None
    statistics, calibration = prepare_initialization(
        student.config, teacher, layer_map, blocks, DataCollatorWithPadding(tokenizer)
    )
    return initialize_student(student, teacher, layer_map, statistics, calibration, seed, teacher_name)
