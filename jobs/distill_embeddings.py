"""Embedding distillation (``compact-bert distill embeddings``): a compact or MoE student learns a sentence-transformers teacher's embeddings.

With no arguments: teacher all-MiniLM-L6-v2 (packaged), student minilm-3l-384h-ffn1024 initialized from the
teacher's layers 1, 3, 5 (each FFN's 1,024 most important neurons), the bundled sentences (STS-B train sentences
without their scores, and the SST-2 training slice), then the student's STS Benchmark dev Spearman next to the
teacher's. The output folder is a sentence-transformers folder: ``SentenceTransformer(folder)`` loads it, with or
without compact-bert installed (a dense student is transformers' BERT; a MoE student adds ``trust_remote_code=True``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from torch import nn

from ..configuration import PRESETS, MiniMoEConfig
from ..configuration.dense_students import is_dense_student
from ..distillation.data import PACKAGED_TEACHER
from ..distillation.embedding_config import EmbeddingDistillationConfig
from ..distillation.embedding_data import (
    EmbeddingDistillationCollator,
    teacher_sentence_embeddings,
    tokenize_sentences,
)
from ..distillation.embedding_trainer import EmbeddingDistillationTrainer
from ..distillation.relation_kernels import check_relation_kernel_environment, relation_kernel_record
from ..distillation.teacher_init_runner import start_from_teacher
from ..distillation.teachers import resolve_model_path
from ..embeddings.bundled_corpus import bundled_stsb_sentences
from ..embeddings.pooling import POOLING_MODES, SentenceEmbedder
from ..embeddings.sentence_transformers_folder import (
    EmbeddingHead,
    has_sentence_transformers_modules,
    load_sentence_embedder,
)
from ..embeddings.sentences import read_sentences
from ..evaluation.sts import bundled_sts_validation, evaluate_sts, read_sts_pairs, sts_data_label
from ..finetuning.bundled_data import bundled_sst2_files
from ..model_cards.load_calls import load_call
from ..modeling.model_stats import count_parameters
from ..training.argument_checks import check_output_dir_creatable
from ..training.output_folders import check_run_output
from ..training.run_errors import RunSettingsError
from ..training.text_files import parse_json_object
from .model_building import build_from_preset
from .run_report import train_and_report

__all__ = [
    "EmbeddingStudentArguments",
    "build_projection",
    "default_sentence_files",
    "distill_embeddings",
    "load_teacher_embedder",
]


@dataclass
class EmbeddingStudentArguments:
    teacher: str = field(
        default=PACKAGED_TEACHER,
        metadata={
            "help": f"A sentence-transformers folder (modules.json), a transformers encoder folder with --pooling, "
            f"or '{PACKAGED_TEACHER}' for the packaged teacher."
        },
    )
    pooling: str | None = field(
        default=None,
        metadata={
            "help": f"Teacher pooling when the teacher folder has no modules.json: one of {', '.join(POOLING_MODES)} "
            "(a sentence-transformers teacher's own pooling is used otherwise)."
        },
    )
    normalize: bool = field(
        default=True, metadata={"help": "With --pooling: L2-normalise the teacher's (and the student's) embeddings."}
    )
    student_preset: str = field(
        default="minilm-3l-384h-ffn1024",
        metadata={
            "help": "Student preset (`compact-bert presets`): minilm-* dense students, minimoe-* MoE students. The "
            "default, 3 of the teacher's 6 layers at its width with the 1,024 most important of each FFN's "
            "1,536 neurons, runs at 0.41x the teacher's latency and keeps 98.1%% of its STS-B Spearman "
            "(docs/embeddings.md)."
        },
    )
    student_overrides: str = field(
        default="{}",
        metadata={
            "help": "JSON object of student config fields. MoE students train without a capacity limit (no token "
            "dropped from an embedding) unless this sets capacity_factor."
        },
    )
    init_from_teacher: str = field(
        default="auto",
        metadata={
            "help": "'auto': start from the teacher wherever the shapes allow (layer map, importance-ranked width, "
            "upcycled experts); 'none': random initialization."
        },
    )
    layer_map: str = field(
        default="uniform",
        metadata={"help": "0-based teacher layer of each student layer ('0,2,4,5'), or 'uniform'."},
    )
    projection: str = field(
        default="auto",
        metadata={
            "help": "'auto': a linear projection (sentence-transformers' Dense) from the student's width to the "
            "teacher's embedding size where they differ; 'none': refuse students of another width."
        },
    )
    sentences: list[str] | None = field(
        default=None,
        metadata={
            "help": "Training sentences: .txt files (one per line) or .tsv files with a header naming text columns "
            "(e.g. ../shared/data/stsb/train.tsv); default: the bundled sentences."
        },
    )
    sts_file: str | None = field(
        default=None,
        metadata={
            "help": "STS file for evaluation (sentence1, sentence2, score in [0, 5]); default: the bundled STS "
            "Benchmark dev set. Evaluation only: nothing is selected on it."
        },
    )
    teacher_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Teacher-embedding cache (default: $COMPACT_BERT_CACHE or ~/.cache/compact_bert)."},
    )

    def __post_init__(self):
        if self.pooling is not None and self.pooling not in POOLING_MODES:
            raise ValueError(f"--pooling must be one of {', '.join(POOLING_MODES)}, got {self.pooling!r}.")
        if self.projection not in ("auto", "none"):
            raise ValueError(f"--projection must be 'auto' or 'none', got {self.projection!r}.")
        if self.init_from_teacher not in ("auto", "none"):
            raise ValueError(f"--init_from_teacher must be 'auto' or 'none', got {self.init_from_teacher!r}.")


def default_sentence_files() -> list[Path]:
    """The default corpus: the bundled STS-B train sentence slice and the bundled SST-2 training sentences."""
    return [bundled_stsb_sentences(), bundled_sst2_files()["train"]]


def load_teacher_embedder(
    name_or_path: str, pooling: str | None, normalize: bool, max_seq_length: int, flag: str = "--teacher"
):
    """The teacher ``SentenceEmbedder`` and its tokenizer; a folder without sentence-transformers modules needs
    ``pooling``. Errors name ``flag``, the argument the folder came from."""
    from ..training.compat import FROM_PRETRAINED_KWARGS

    try:
        folder = resolve_model_path(name_or_path)
    except ValueError as error:
        raise RunSettingsError(f"{flag}: {error}") from None
    head = None
    if pooling is not None:
        head = EmbeddingHead(pooling=pooling, normalize=normalize, max_seq_length=max_seq_length)
    elif not has_sentence_transformers_modules(folder):
        raise RunSettingsError(
            f"{flag} {name_or_path}: {folder} is not a sentence-transformers folder (no modules.json) and no "
            f"--pooling is given; pass --pooling {'|'.join(POOLING_MODES)} (and --normalize) for a plain encoder."
        )
    teacher = load_sentence_embedder(folder, head, **FROM_PRETRAINED_KWARGS)
    teacher.max_seq_length = min(teacher.max_seq_length, max_seq_length)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as error:
        raise RunSettingsError(f"{flag} {name_or_path}: no usable tokenizer in {folder} ({error}).") from None
    return teacher, tokenizer


def build_projection(student_width: int, teacher: SentenceEmbedder, channels: list[int] | None) -> nn.Linear:
    """A projection from the student's width to the teacher's embedding size. Where the teacher has one, the
    student's starts from its columns of the student's channels; where the student kept a subset of the teacher's
    channels (``channels``), it starts as the map putting each back in its place; otherwise random."""
    projection = nn.Linear(student_width, teacher.embedding_dimension)
    source = teacher.projection
    with torch.no_grad():
        if source is not None and channels is not None:
            projection.weight.copy_(source.weight[:, channels])
            projection.bias.copy_(source.bias if source.bias is not None else torch.zeros_like(projection.bias))
        elif source is None and channels is not None:
            projection.weight.zero_()
            projection.weight[channels, torch.arange(student_width)] = 1.0
            projection.bias.zero_()
    return projection


def _student_embedder(
    args: EmbeddingStudentArguments, teacher: SentenceEmbedder, tokenizer, train_data, seed: int, max_seq_length: int
):
    transformers.set_seed(seed)
    # MoE students learn without a capacity limit (dropping a token past its FFN costs accuracy,
    # and an embedding averages every token), unless the overrides set one.
    overrides = parse_json_object(args.student_overrides, "student_overrides")
    if PRESETS.get(args.student_preset, (None,))[0] is MiniMoEConfig:
        overrides = {"capacity_factor": None, **overrides}
    student = build_from_preset(
        args.student_preset,
        overrides,
        "student_overrides",
        transformers.AutoModel,
        teacher_config=teacher.encoder.config,
    )
    if not isinstance(student.config, MiniMoEConfig) and not is_dense_student(student.config):
        raise RunSettingsError(f"--student_preset {args.student_preset!r} is not a MiniMoE/MiniLM preset.")
    if student.config.vocab_size != len(tokenizer):
        raise RunSettingsError(
            f"The student's vocab_size {student.config.vocab_size} differs from the teacher "
            f"tokenizer's {len(tokenizer)} tokens: both must read the same token ids."
        )
    initialization = start_from_teacher(
        student, teacher.encoder, args.teacher, args.init_from_teacher, args.layer_map, train_data, tokenizer, seed
    )
    width, teacher_width = student.config.hidden_size, teacher.embedding_dimension
    projection = None
    if width != teacher_width or teacher.projection is not None:
        if args.projection == "none":
            raise RunSettingsError(
                f"--projection none: the student's hidden_size {width} differs from the teacher's embedding size "
                f"{teacher_width} (or the teacher projects its embedding); allow a projection (--projection auto) or "
                f"choose a student of width {teacher_width}."
            )
        channels = (initialization or {}).get("channel_indices")
        if channels is None and initialization is not None and width == teacher.encoder.config.hidden_size:
            channels = list(range(width))
        projection = build_projection(width, teacher, channels)
    embedder = SentenceEmbedder(student, teacher.pooling, projection, teacher.normalize, max_seq_length)
    return embedder, initialization


def distill_embeddings(args: EmbeddingStudentArguments, training_args: EmbeddingDistillationConfig) -> dict:
    """Distill the student (module docstring) into ``training_args.output_dir``, a sentence-transformers folder;
    returns its run summary (with the teacher's and the student's STS Spearman)."""
    try:
        check_relation_kernel_environment()
    except ValueError as error:
        raise RunSettingsError(str(error)) from None
    check_run_output(training_args, args)
    if args.teacher_cache_dir is not None:  # before the teacher's embeddings are computed, not after
        check_output_dir_creatable(args.teacher_cache_dir, "teacher_cache_dir")
    max_length = training_args.max_seq_length
    sources = args.sentences or [str(path) for path in default_sentence_files()]
    batch = training_args.per_device_train_batch_size * max(1, training_args.world_size)
    sentences = read_sentences(sources, minimum=batch)
    sts_pairs = read_sts_pairs(args.sts_file or bundled_sts_validation())
    teacher, tokenizer = load_teacher_embedder(args.teacher, args.pooling, args.normalize, max_length)
    # One table of teacher embeddings for the training sentences and, after them, the STS sentences: the held-out
    # loss is the MSE to the teacher on the evaluation sentences (no scores involved).
    evaluation_sentences = sts_pairs.sentences()
    every_sentence = tokenize_sentences(sentences + evaluation_sentences, tokenizer, max_length)
    train_data = every_sentence.select(range(len(sentences)))
    eval_data = every_sentence.select(range(len(sentences), len(every_sentence)))
    embedder, initialization = _student_embedder(args, teacher, tokenizer, train_data, training_args.seed, max_length)
    start = time.perf_counter()
    cached = teacher_sentence_embeddings(teacher, tokenizer, every_sentence, max_length, args.teacher_cache_dir)
    teacher_seconds = round(time.perf_counter() - start, 1)
    print(
        f"Teacher embeddings of {len(every_sentence)} sentences {'read from' if cached.reused else 'written to'} "
        f"{cached.folder} ({teacher_seconds} s)."
    )
    teacher_sts = evaluate_sts(teacher, tokenizer, sts_pairs, training_args.per_device_eval_batch_size)
    trainer = EmbeddingDistillationTrainer(
        model=embedder,
        teacher=teacher.encoder,
        args=training_args,
        train_dataset=train_data,
        eval_dataset=eval_data,
        data_collator=EmbeddingDistillationCollator(tokenizer, cached.outputs["sentence_embedding"]),
        processing_class=tokenizer,
        sts_pairs=sts_pairs,
    )
    total, active = count_parameters(embedder.encoder)
    output_dir = str(Path(training_args.output_dir).resolve())
    summary = train_and_report(
        trainer,
        tokenizer,
        training_args,
        {
            "role": "embedding student",
            "teacher": args.teacher,
            "student_preset": args.student_preset,
            "sentences": sources,
            "num_sentences": len(sentences),
            "sts_file": sts_pairs.source,
            "teacher_sts": teacher_sts,
            "teacher_embeddings_cache": str(cached.folder),
            "teacher_embeddings_seconds": teacher_seconds,
            **(
                {"relation_kernel": relation_kernel_record(training_args.device)}
                if training_args.relation_weight
                else {}
            ),
            "pooling": embedder.pooling,
            "normalize": embedder.normalize,
            "projection": None
            if embedder.projection is None
            else [embedder.projection.in_features, embedder.projection.out_features],
            "student_total_params": total,
            "student_active_params_per_token": active,
            **({"teacher_initialization": initialization} if initialization else {}),
            "load_with": load_call(
                "sentence_transformers.SentenceTransformer",
                output_dir,
                remote_code=bool(getattr(embedder.encoder.config, "auto_map", None)),
            ),
        },
    )
    if "eval_sts_spearman_cosine" in summary:
        kept = 100 * summary["eval_sts_spearman_cosine"] / teacher_sts["spearman_cosine"]
        print(
            f"{sts_data_label(args.sts_file)} Spearman (cosine, x100): teacher {teacher_sts['spearman_cosine']:.2f}, "
            "student "
            f"{summary['eval_sts_spearman_cosine']:.2f} ({kept:.1f}% kept)."
        )
    return summary
