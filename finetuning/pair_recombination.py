"""Recombined sentence pairs: new pairs for the teacher to label, made of the training set's own sentences.

The perturbed copies of ``augmentation.py`` ask the teacher about a pair whose sentences have words masked or are cut
to n-grams; every copy still pairs a sentence with its own partner. Augmented SBERT (Thakur et al., 2021, "Augmented
SBERT: Data Augmentation Method for Improving Bi-Encoders for Pairwise Sentence Scoring Tasks", §3-4) grows a
sentence-pair training set another way: each sentence is paired with *other* sentences of the training set that are
lexically close to it (their BM25 sampling), and the fine-tuned cross-encoder labels the new "silver" pairs. Random
partners would be almost all unrelated (one end of the scale); partners that share the sentence's rarer words span the
range of relatedness a pair task is scored on, and both sentences of every new pair are whole, real sentences.

Partners are ranked by TF-IDF cosine over lower-cased words (BM25's ranking without its length saturation, which
matters little for sentences of a dozen words), computed with a sparse product in blocks so that memory stays
linear in the number of sentences. For each training pair, its first sentence is paired with its ``per_pair``
nearest sentences from the other pairs (either column); a partner that shares no word, the sentence itself, its own
partner, a pair already in the training set (in either order) or already drawn is skipped. Ties go to the sentence
seen first: the result depends only on the training data, not on any seed, so every seed of a grid trains on the
same transfer set and reuses the teacher's cached logits.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter

import datasets
import torch

from .augmentation import AUGMENTED_COLUMN

__all__ = ["lexical_neighbours", "recombine_pairs"]

# Anchors scored per sparse product: a block of 512 sentences against 10,000 is 20 MB of float32.
BLOCK_SIZE = 512
_WORD = re.compile(r"[a-z0-9]+")


def _tfidf_matrix(sentences: list[str]) -> torch.Tensor:
    """Rows: the sentences' L2-normalized TF-IDF vectors over their lower-cased words (smoothed IDF,
    ``log((1 + N) / (1 + df)) + 1``), as a sparse COO tensor."""
    counts = [Counter(_WORD.findall(sentence.lower())) for sentence in sentences]
    frequency = Counter(word for words in counts for word in words)
    vocabulary = {word: column for column, word in enumerate(sorted(frequency))}
    idf = {word: math.log((1 + len(sentences)) / (1 + df)) + 1 for word, df in frequency.items()}
    rows, columns, values = [], [], []
    for row, words in enumerate(counts):
        weights = {word: count * idf[word] for word, count in words.items()}
        norm = math.sqrt(sum(weight * weight for weight in weights.values())) or 1.0
        for word, weight in sorted(weights.items()):
            rows.append(row)
            columns.append(vocabulary[word])
            values.append(weight / norm)
    return torch.sparse_coo_tensor(
        torch.tensor([rows, columns], dtype=torch.long).reshape(2, -1),
        torch.tensor(values, dtype=torch.float64),
        (len(sentences), max(len(vocabulary), 1)),
        check_invariants=True,
    ).coalesce()


def lexical_neighbours(sentences: list[str], anchors: list[int], candidates: int) -> list[list[tuple[int, float]]]:
    """For each anchor (an index into ``sentences``), up to ``candidates`` other sentences that share a word with it,
    as ``(index, cosine)`` from the most similar down (ties: the lower index first)."""
    if not anchors:
        return []
    matrix = _tfidf_matrix(sentences)
    with warnings.catch_warnings():  # "CSR support is in beta": the product used here is long stable
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
        rows_of = matrix.to_sparse_csr()  # products are several times faster in CSR than in COO
    # ties go to the lower index: a penalty far below any real difference of two cosines makes every score unique
    tie_break = torch.arange(len(sentences), dtype=torch.float64).unsqueeze(1) * 1e-12
    found = []
    for start in range(0, len(anchors), BLOCK_SIZE):
        block = anchors[start : start + BLOCK_SIZE]
        rows = matrix.index_select(0, torch.tensor(block, dtype=torch.long)).to_dense()
        scores = rows_of @ rows.t()  # (sentences, block), float64: the tie-break below stays far below any gap
        scores[block, torch.arange(len(block))] = 0.0  # never the anchor itself
        indices = torch.topk(scores - tie_break, min(candidates + 1, len(sentences)), dim=0).indices
        for ranked in zip(indices.t().tolist(), scores.gather(0, indices).t().tolist()):
            found.append([(index, score) for index, score in zip(*ranked) if score > 0][:candidates])
    return found


def recombine_pairs(split: datasets.Dataset, text_columns: tuple[str, str], per_pair: int) -> datasets.Dataset:
    """``split`` followed by up to ``per_pair`` recombined pairs per original example (module docstring), marked in
    the ``augmented`` column like perturbed copies (added when absent); the new pairs keep their source's other
    columns, label included, until the teacher relabels them. Only original examples are recombined."""
    if len(text_columns) != 2:
        raise ValueError(f"Recombined pairs need a sentence-pair task (two text columns), got {text_columns}.")
    if per_pair < 0:
        raise ValueError(f"per_pair must be >= 0, got {per_pair}.")
    if AUGMENTED_COLUMN not in split.column_names:
        split = split.add_column(AUGMENTED_COLUMN, [False] * len(split))
    if per_pair == 0:
        return split
    first, second = text_columns
    columns = {name: list(split[name]) for name in split.column_names}  # a Dataset's column reads row by row slowly
    originals = [index for index, augmented in enumerate(columns[AUGMENTED_COLUMN]) if not augmented]
    firsts, seconds = columns[first], columns[second]
    pool: dict[str, int] = {}
    for index in originals:
        for sentence in (firsts[index], seconds[index]):
            if sentence is not None:
                pool.setdefault(str(sentence), len(pool))
    sentences = list(pool)
    sources = [index for index in originals if firsts[index] is not None and seconds[index] is not None]
    seen = {(str(firsts[index]), str(seconds[index])) for index in sources}
    seen |= {(b, a) for a, b in seen}
    # a few spare candidates per anchor: some are skipped as duplicates or the anchor's own partner
    neighbours = lexical_neighbours(sentences, [pool[str(firsts[index])] for index in sources], per_pair + 4)
    added = {name: [] for name in split.column_names}
    for index, ranked in zip(sources, neighbours):
        anchor, drawn = str(firsts[index]), 0
        for neighbour, _ in ranked:
            partner = sentences[neighbour]
            if drawn == per_pair:
                break
            if partner == anchor or (anchor, partner) in seen:
                continue
            seen |= {(anchor, partner), (partner, anchor)}
            drawn += 1
            for name in split.column_names:
                value = columns[name][index]
                added[name].append(partner if name == second else True if name == AUGMENTED_COLUMN else value)
    if not added[first]:
        return split
    return datasets.concatenate_datasets([split, datasets.Dataset.from_dict(added, features=split.features)])
