"""Semantic textual similarity: the STS Benchmark file format and the metrics of an embedding model on it.

``sts_spearman`` has the semantics of sentence-transformers' ``EmbeddingSimilarityEvaluator`` with cosine
similarity: the Spearman rank correlation between the gold scores and the cosine similarities of the two sentences'
embeddings, ×100 (ties get their average rank, as ``scipy.stats.spearmanr`` gives them). One number should not
decide, so ``paraphrase_recall_at_1`` adds a small retrieval check: among the pairs rated as paraphrases (gold score
≥ 4 of 5), the share of first sentences whose nearest neighbour among all those pairs' second sentences is its own.

STS files are tab-separated with a header naming ``sentence1``, ``sentence2`` and ``score``; the sentences contain
``"`` characters, so they are read with quoting off (a quote never joins rows).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch
from torch.nn import functional as F

from ..training.run_errors import RunSettingsError
from ..training.text_files import read_utf8_text

__all__ = [
    "PARAPHRASE_THRESHOLD",
    "StsPairs",
    "bundled_sts_validation",
    "evaluate_sts",
    "is_sts_benchmark_dev",
    "paraphrase_recall_at_1",
    "read_sts_pairs",
    "spearman",
    "sts_data_label",
    "sts_spearman",
]

PARAPHRASE_THRESHOLD = 4.0
_COLUMNS = ("sentence1", "sentence2", "score")


@dataclass
class StsPairs:
    sentence1: list[str]
    sentence2: list[str]
    scores: list[float]
    source: str

    def __len__(self) -> int:
        return len(self.scores)

    def sentences(self) -> list[str]:
        """Every sentence of the pairs, each once, in order of first appearance."""
        return list(dict.fromkeys([*self.sentence1, *self.sentence2]))


def bundled_sts_validation() -> Path:
    """The STS Benchmark dev set shipped with the package (``evaluation/stsb/validation.tsv.gz``, unchanged)."""
    return Path(str(resources.files(__package__).joinpath("stsb", "validation.tsv.gz")))


def is_sts_benchmark_dev(path: str | Path) -> bool:
    """Whether ``path`` holds the STS Benchmark dev set (the bundled file's pairs and scores, compressed or not, under
    any name): only then may a result be called "STS Benchmark dev"."""
    try:
        pairs, bundled = read_sts_pairs(path), read_sts_pairs(bundled_sts_validation())
    except (RunSettingsError, OSError):
        return False
    return (pairs.sentence1, pairs.sentence2, pairs.scores) == (bundled.sentence1, bundled.sentence2, bundled.scores)


def sts_data_label(path: str | Path | None) -> str:
    """How output and cards name an STS evaluation file: "STS Benchmark dev" for that set, else the file's name."""
    return "STS Benchmark dev" if path is None or is_sts_benchmark_dev(path) else f"STS file {Path(path).name}"


def read_sts_pairs(path: str | Path, score_range: tuple[float, float] = (0.0, 5.0)) -> StsPairs:
    """Pairs and gold scores of an STS file (``.tsv`` or ``.tsv.gz``); every row is checked: its field count, its
    score (a number within ``score_range``) and non-empty sentences, with the file and line named."""
    path = Path(path)
    if not path.is_file():
        raise RunSettingsError(f"STS file {path} does not exist.")
    text = read_utf8_text(path)
    rows = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(rows, None)
    missing = [name for name in _COLUMNS if header is None or name not in header]
    if missing:
        raise RunSettingsError(
            f"{path}: the header has no column {', '.join(map(repr, missing))}; its columns: "
            f"{header}. STS files need {', '.join(_COLUMNS)} (tab-separated)."
        )
    positions = [header.index(name) for name in _COLUMNS]
    low, high = score_range
    pairs = StsPairs([], [], [], str(path))
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise RunSettingsError(
                f"{path}, line {line}: {len(row)} tab-separated fields, the header has {len(header)} (a tab inside a "
                "sentence, or a quote that another reader would have joined rows at)."
            )
        first, second, score_text = (row[position] for position in positions)
        try:
            score = float(score_text)
        except ValueError:
            raise RunSettingsError(f"{path}, line {line}: score {score_text!r} is not a number.") from None
        if not low <= score <= high:
            raise RunSettingsError(
                f"{path}, line {line}: score {score} is outside the declared range [{low}, {high}]."
            )
        if not first.strip() or not second.strip():
            raise RunSettingsError(f"{path}, line {line}: an empty sentence.")
        pairs.sentence1.append(first)
        pairs.sentence2.append(second)
        pairs.scores.append(score)
    if len(pairs) < 2:
        raise RunSettingsError(f"{path} holds {len(pairs)} pair(s): a rank correlation needs at least 2.")
    return pairs


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks with ties sharing their average rank (``scipy.stats.rankdata(method="average")``)."""
    values = values.double()
    order = torch.argsort(values, stable=True)
    sorted_values = values[order]
    starts = torch.ones_like(sorted_values, dtype=torch.bool)
    starts[1:] = sorted_values[1:] != sorted_values[:-1]
    group = torch.cumsum(starts.long(), 0) - 1
    positions = torch.arange(1, len(values) + 1, dtype=torch.float64)
    sums = torch.zeros(int(group[-1]) + 1, dtype=torch.float64).index_add_(0, group, positions)
    counts = torch.zeros_like(sums).index_add_(0, group, torch.ones_like(positions))
    ranks = torch.empty_like(values)
    ranks[order] = (sums / counts)[group]
    return ranks


def _pearson(first: torch.Tensor, second: torch.Tensor) -> float:
    first, second = first.double() - first.double().mean(), second.double() - second.double().mean()
    denominator = first.norm() * second.norm()
    return float((first @ second) / denominator) if denominator > 0 else float("nan")


def spearman(first, second) -> float:
    """Spearman's rank correlation of two equally long sequences (Pearson correlation of their average ranks)."""
    first, second = torch.as_tensor(first), torch.as_tensor(second)
    return _pearson(_average_ranks(first), _average_ranks(second))


def _cosines(embeddings1: torch.Tensor, embeddings2: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(embeddings1.double(), embeddings2.double(), dim=1)


def sts_spearman(embeddings1: torch.Tensor, embeddings2: torch.Tensor, scores) -> float:
    """Spearman of cosine similarity against gold scores, ×100 (``EmbeddingSimilarityEvaluator``'s
    ``spearman_cosine``, which sentence-transformers reports in [0, 1])."""
    return 100.0 * spearman(_cosines(embeddings1, embeddings2), torch.as_tensor(scores, dtype=torch.float64))


def paraphrase_recall_at_1(
    embeddings1: torch.Tensor, embeddings2: torch.Tensor, scores, threshold: float = PARAPHRASE_THRESHOLD
) -> float:
    """×100: among pairs scored ≥ ``threshold``, how often a first sentence's nearest second sentence (cosine) is
    its own partner."""
    selected = torch.as_tensor(scores, dtype=torch.float64) >= threshold
    if int(selected.sum()) < 2:
        return float("nan")
    queries = F.normalize(embeddings1[selected].double(), dim=1)
    candidates = F.normalize(embeddings2[selected].double(), dim=1)
    nearest = (queries @ candidates.T).argmax(dim=1)
    return 100.0 * float((nearest == torch.arange(len(nearest))).double().mean())


def evaluate_sts(embedder, tokenizer, pairs: StsPairs, batch_size: int = 64) -> dict[str, float]:
    """The STS metrics of a ``SentenceEmbedder`` on ``pairs``: Spearman and Pearson of cosine similarity (×100) and
    the paraphrase recall@1 (×100). Every distinct sentence is embedded once."""
    sentences = pairs.sentences()
    embeddings = embedder.encode(sentences, tokenizer, batch_size=batch_size)
    index = {sentence: position for position, sentence in enumerate(sentences)}
    first = embeddings[[index[sentence] for sentence in pairs.sentence1]]
    second = embeddings[[index[sentence] for sentence in pairs.sentence2]]
    scores = torch.as_tensor(pairs.scores, dtype=torch.float64)
    return {
        "spearman_cosine": round(sts_spearman(first, second, scores), 4),
        "pearson_cosine": round(100.0 * _pearson(_cosines(first, second), scores), 4),
        "paraphrase_recall_at_1": round(paraphrase_recall_at_1(first, second, scores), 4),
        "pairs": len(pairs),
    }
