"""``compact-bert evaluate sts MODEL``: the STS metrics of a sentence-embedding folder (a distilled student, the
packaged teacher, any sentence-transformers folder of a BERT-like encoder)."""

from __future__ import annotations

import argparse
import json

from ..training.run_errors import RunSettingsError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="Evaluate a sentence-embedding folder on an STS file (Spearman of cosine similarity x100, as "
        "sentence-transformers' EmbeddingSimilarityEvaluator, and paraphrase recall@1).",
        description="Embeds both sentences of every pair with the folder's own pooling, projection and normalisation "
        "(its sentence-transformers modules) and prints the metrics as JSON.",
    )
    parser.add_argument("benchmark", choices=["sts"], help="What to evaluate: sts (semantic textual similarity).")
    parser.add_argument(
        "model_dir", help="A sentence-transformers folder, or 'all-MiniLM-L6-v2' (the packaged teacher)."
    )
    parser.add_argument(
        "--sts_file",
        default=None,
        help="Tab-separated sentence1, sentence2, score in [0, 5] (.tsv or .tsv.gz); default: the "
        "bundled STS Benchmark dev set.",
    )
    parser.add_argument("--batch_size", type=int, default=64, help="Sentences per forward pass.")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..evaluation.sts import bundled_sts_validation, evaluate_sts, read_sts_pairs
    from ..jobs.distill_embeddings import load_teacher_embedder

    if args.batch_size < 1:
        raise SystemExit(f"compact-bert evaluate: --batch_size must be >= 1, got {args.batch_size}.")
    try:
        pairs = read_sts_pairs(args.sts_file or bundled_sts_validation())
        embedder, tokenizer = load_teacher_embedder(args.model_dir, None, True, 512, flag="MODEL_DIR")
    except RunSettingsError as error:
        raise SystemExit(f"compact-bert evaluate: {error}") from None
    metrics = evaluate_sts(embedder, tokenizer, pairs, args.batch_size)
    print(json.dumps({"model": args.model_dir, "sts_file": pairs.source, **metrics}, indent=2))
    return 0
