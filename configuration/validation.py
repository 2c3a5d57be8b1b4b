"""Field checks shared by every compact-bert config.

Each check raises a ``ValueError`` that names the config class, the field, the bad value and what would
be valid, so that a wrong config fails when it is built rather than as a shape error deep in ``forward``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "require_choice",
    "require_divisible",
    "require_dropout_probability",
    "require_positive_float",
    "require_positive_int",
]


def _fail(owner: str, field: str, value: Any, allowed: str) -> None:
    raise ValueError(f"{owner}: `{field}` must be {allowed}, got {value!r}.")


def require_positive_int(owner: str, field: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _fail(owner, field, value, f"an integer >= {minimum}")


def require_positive_float(owner: str, field: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        _fail(owner, field, value, "a number > 0" + (" or None" if allow_none else ""))


def require_dropout_probability(owner: str, field: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        _fail(owner, field, value, "a probability in [0, 1)" + (" or None" if allow_none else ""))


def require_choice(owner: str, field: str, value: Any, choices: Iterable[str]) -> None:
    choices = sorted(choices)
    if value not in choices:
        _fail(owner, field, value, "one of " + ", ".join(repr(choice) for choice in choices))


def require_divisible(owner: str, field: str, value: int, divisor_field: str, divisor: int) -> None:
    if value % divisor != 0:
        _fail(owner, field, value, f"divisible by `{divisor_field}` ({divisor})")
