"""Loading a model folder as a user would expect it loaded: every backbone weight from the file, or an error.

``from_pretrained`` initializes whatever the checkpoint lacks and ignores whatever it holds in excess, and reports
both in a load report nobody reads (and a config that disagrees with the weights only as a bare size mismatch): a teacher whose FFN weights are missing is then used half-random, a config of
another model type over a folder's weights trains a random model, an export of a base model as a classifier ships a
random head and reports parity. ``load_checked`` reads the report: a missing or unexpected weight of the backbone
(the embeddings and the encoder layers) is an error listing them; a task head that the caller is about to train
(missing) or does not use (unexpected), and a pooler, are not; ``checkpoint_checks`` names the config field that
disagrees with a tensor's shape, a wrong layer count and non-finite weights. A truncated or corrupt weight file is
named instead of surfacing as a ``SafetensorError`` traceback.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from .checkpoint_checks import check_loaded_checkpoint
from .run_errors import RunSettingsError

logger = logging.getLogger(__name__)

__all__ = [
    "WeightsLoadError",
    "backbone_mismatches",
    "load_checked",
    "unreadable_weights_file",
]

# ``from_pretrained`` arguments that locate a Hub checkpoint's files (to read their safetensors headers).
_HUB_ARGUMENTS = ("subfolder", "revision", "cache_dir", "token", "local_files_only")
# Task heads and poolers (transformers' names): a weight whose name passes through none of them is the backbone's.
_HEAD_PARTS = (
    "classifier",
    "qa_outputs",
    "cls.",
    "lm_head",
    "pooler",
    "pre_classifier",
    "vocab_",
    "score.",
    "seq_relationship",
    "predictions.",
)


class WeightsLoadError(RunSettingsError):
    """A model folder's weights cannot be read, or do not cover the model built from its config."""


def backbone_mismatches(info: dict) -> tuple[list[str], list[str]]:
    """The missing and the unexpected weight names of a load report that belong to the backbone."""

    def backbone(names) -> list[str]:
        return sorted(name for name in names or () if not any(part in name for part in _HEAD_PARTS))

    return backbone(info.get("missing_keys")), backbone(info.get("unexpected_keys"))


def _listing(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def unreadable_weights_file(folder: str | Path) -> str:
    """The name of the first ``*.safetensors`` file in ``folder`` whose header cannot be read (the one a failed load
    stumbled on), else the names of all of them."""
    from safetensors import SafetensorError, safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except (SafetensorError, OSError):
            return file.name
    return ", ".join(file.name for file in files) or "(none found)"


def load_checked(auto_class, folder: str | Path, role: str, require_every_weight: bool = False, **from_pretrained):
    """``auto_class.from_pretrained(folder, **from_pretrained)``, refused when the weights file cannot be read or the
    backbone's weights do not match the model the config describes; ``role`` names the flag or argument. With
    ``require_every_weight`` a missing task head is refused too (an export would ship it random). A shape that
    disagrees with the config is refused naming the config field, except, with ``ignore_mismatched_sizes=True``, in
    a task head (a new number of labels), which then starts from random weights."""
    from safetensors import SafetensorError

    ignore_mismatched_sizes = from_pretrained.pop("ignore_mismatched_sizes", False)
    hub_kwargs = {name: from_pretrained[name] for name in _HUB_ARGUMENTS if from_pretrained.get(name) is not None}
    try:
        with _without_transformers_load_report():
            # Mismatched tensors reach the report (and ``check_loaded_checkpoint``) only with the flag set: 4.57
            # raises a bare size mismatch otherwise, before any report.
            model, info = auto_class.from_pretrained(
                folder, output_loading_info=True, ignore_mismatched_sizes=True, **from_pretrained
            )
    except SafetensorError as error:
        raise WeightsLoadError(
            f"{role} {folder}: its weights file {unreadable_weights_file(folder)} cannot be read "
            f"({error}): it is truncated or corrupt; save or download it again."
        ) from None
    except OSError as error:
        if "safetensors" in str(error).lower() or "deserializ" in str(error).lower():
            raise WeightsLoadError(
                f"{role} {folder}: its weights file {unreadable_weights_file(folder)} cannot be read ({error})."
            ) from None
        raise
    check_loaded_checkpoint(model, info, folder, ignore_mismatched_sizes, hub_kwargs)
    missing, unexpected = backbone_mismatches(info)
    if require_every_weight:
        missing = sorted(info.get("missing_keys") or ())
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} backbone weight(s) missing from the checkpoint ({_listing(missing)})")
        if unexpected:
            parts.append(
                f"{len(unexpected)} weight(s) in the checkpoint that the model has no place for "
                f"({_listing(unexpected)})"
            )
        raise WeightsLoadError(
            f"{role} {folder}: " + "; ".join(parts) + f". Its config.json builds a {type(model).__name__} that these "
            "weights do not fill: they would start random. Check that config.json and the weights belong together."
        )
    new_head = sorted(info.get("missing_keys") or ())
    if new_head:
        logger.info("%s %s: a new task head (%s) starts from random weights.", role, folder, _listing(new_head))
    return model


@contextlib.contextmanager
def _without_transformers_load_report():
    """transformers prints its own table of missing / unexpected weights on every load (8 lines for a new
    classifier; "Some weights of ... were not initialized" on 4.57); ``load_checked`` reads that report itself and
    refuses what matters, so the table is kept off the console unless ``--verbose``. A filter, not a log level:
    transformers 5 runs an extra tensor-parallel check (and warns from it) whenever its loader's level is raised."""
    from .console_log import verbose

    report_logger = logging.getLogger("transformers.modeling_utils")
    report_filter = _DropLoadReport()
    if not verbose():
        report_logger.addFilter(report_filter)
    try:
        yield
    finally:
        report_logger.removeFilter(report_filter)


class _DropLoadReport(logging.Filter):
    _FRAGMENTS = ("LOAD REPORT", "were not initialized from the model checkpoint", "were not used when initializing")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self._FRAGMENTS)
