"""What a ``sentence-embedding`` export adds: the check against sentence-transformers itself, and its module files.

The exported graph computes the folder's whole sentence-transformers pipeline. Besides the check every export gets
(onnxruntime against PyTorch on differently routed random ids), it is checked on real sentences of several lengths
against ``SentenceTransformer(folder, trust_remote_code=True).encode`` where sentence-transformers is installed (the
transformers 5 line), and against compact-bert's own ``SentenceEmbedder`` elsewhere (which the tests hold equal to
``encode``).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np

__all__ = [
    "PARITY_SENTENCES",
    "check_sentence_transformers_parity",
    "copy_sentence_transformers_files",
    "reference_embeddings",
]

PARITY_ATOL = 1e-4
PARITY_SENTENCES = (
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog, and the dog does not seem to mind at all this time.",
    "Stocks fell sharply on Monday after the central bank raised interest rates by half a percentage point.",
    "Hi!",
)
_MODULE_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def copy_sentence_transformers_files(model_dir: Path, output_dir: Path) -> None:
    """The module files next to ``model.onnx`` (pooling, projection, normalisation), so that tools which read a
    sentence-transformers folder's settings find them in the ONNX folder too."""
    for name in _MODULE_FILES:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, output_dir / name)
    for folder in model_dir.iterdir():
        if folder.is_dir() and folder.name[:1].isdigit() and "_" in folder.name:
            shutil.copytree(folder, output_dir / folder.name, dirs_exist_ok=True)


def reference_embeddings(model_dir: Path, sentences) -> tuple[np.ndarray, str]:
    """``SentenceTransformer.encode`` where sentence-transformers is installed, else ``SentenceEmbedder.encode``;
    returns the embeddings and which one computed them."""
    if importlib.util.find_spec("sentence_transformers") is not None:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_dir), device="cpu", trust_remote_code=True)
        return model.encode(list(sentences), convert_to_numpy=True), "SentenceTransformer.encode"
    import transformers

    from ..embeddings.sentence_transformers_folder import load_sentence_embedder

    embedder = load_sentence_embedder(model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    return embedder.encode(list(sentences), tokenizer).numpy(), "SentenceEmbedder.encode"


def check_sentence_transformers_parity(onnx_path: Path, model_dir: Path, sentences=PARITY_SENTENCES) -> float:
    """Largest |onnxruntime − reference| over ``sentences`` (one padded batch); raises past ``PARITY_ATOL``."""
    import onnxruntime
    import transformers

    from ..embeddings.sentence_transformers_folder import read_embedding_head
    from .tasks import GRAPH_INPUTS

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    head = read_embedding_head(model_dir)
    batch = tokenizer(
        list(sentences), padding=True, truncation=True, max_length=head.max_seq_length, return_tensors="np"
    )
    if "token_type_ids" not in batch:
        batch["token_type_ids"] = np.zeros_like(batch["input_ids"])
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (produced,) = session.run(["sentence_embedding"], {name: batch[name].astype(np.int64) for name in GRAPH_INPUTS})
    expected, reference = reference_embeddings(model_dir, sentences)
    difference = float(np.abs(produced - expected).max())
    if difference > PARITY_ATOL:
        raise RuntimeError(
            f"{onnx_path} differs from {reference} by {difference:.3g} on real sentences (tolerance "
            f"{PARITY_ATOL}): the export is wrong, do not ship it."
        )
    return difference
