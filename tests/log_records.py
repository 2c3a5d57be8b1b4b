"""Messages logged through a named logger, for tests of what the console shows.

transformers' and torch.onnx's loggers do not propagate to the root logger (transformers turns propagation off for
its library logger), so pytest's ``caplog`` never sees their records: a handler is attached where they stop."""

from __future__ import annotations

import contextlib
import logging

__all__ = ["recorded_messages"]


class _Recorder(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def recorded_messages(logger_name: str, level: int | None = None):
    """Yield the list that every message logged through ``logger_name`` (and its children) is appended to while the
    block runs; with ``level``, the logger's own level is set to it for the block."""
    recorder, logger = _Recorder(), logging.getLogger(logger_name)
    previous = logger.level
    logger.addHandler(recorder)
    if level is not None:
        logger.setLevel(level)
    try:
        yield recorder.messages
    finally:
        logger.removeHandler(recorder)
        logger.setLevel(previous)
