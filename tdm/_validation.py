"""Input and hyperparameter checks shared by the library: one declarative way to state what a
parameter may be, and errors that name the owner, the parameter (or column), what is allowed and
what came."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

__all__ = [
    "MIN_SAMPLES",
    "Boolean",
    "Interval",
    "InvalidParameterError",
    "Options",
    "caller_stacklevel",
    "check_finite_or_nan",
    "column_labels",
    "parse_device",
    "resolve_device",
    "resolve_dtype",
    "store_params",
    "validate_params",
]

MIN_SAMPLES = 4
"""Fewest rows an imputer fits on: two disjoint batches of at least two rows each."""


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the function calling this one point at
    the user's line: the first frame outside this library and scikit-learn (whose wrappers,
    such as ``set_output``'s around ``fit_transform``, add frames of their own)."""
    import sklearn

    inside = tuple(f"{Path(file).parent}{os.sep}" for file in (__file__, sklearn.__file__))
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


class InvalidParameterError(ValueError, TypeError):
    """A parameter outside its constraints (a ``ValueError`` and, for a wrong type, a
    ``TypeError``: both ``except`` clauses catch it)."""


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``Integral`` or ``Real``) between ``low`` and ``high``.

    ``closed`` says which ends belong to the interval; ``None`` for an end means unbounded.
    Booleans, NaN and infinities never satisfy it.
    """

    kind: type
    low: float | None
    high: float | None
    closed: Literal["both", "left", "right", "neither"] = "both"

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` lies in the interval and is of its kind."""
        kinds = (Integral, np.integer) if self.kind is Integral else (Real, np.floating)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return False
        value = float(value)
        if not math.isfinite(value):
            return False
        low_open = self.closed in ("right", "neither")
        high_open = self.closed in ("left", "neither")
        below = self.low is not None and (value < self.low or (low_open and value == self.low))
        above = self.high is not None and (value > self.high or (high_open and value == self.high))
        return not (below or above)

    def describe(self) -> str:
        """What the interval holds, in words (``a positive integer``, ``a number in (0, 1)``)."""
        noun = "integer" if self.kind is Integral else "number"
        if self.high is None and self.low == 0:
            strict = self.closed in ("right", "neither")
            if self.kind is Integral and not strict:
                return "a non-negative integer"
            return f"a positive {noun}" if strict else f"a non-negative {noun}"
        if self.high is None and self.kind is Integral and self.low == 1:
            return "a positive integer"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        low = "-inf" if self.low is None else _number(self.low)
        high = "inf" if self.high is None else _number(self.high)
        where = "the open interval " if left == "(" and right == ")" else ""
        return f"a{'n' if noun == 'integer' else ''} {noun} in {where}{left}{low}, {high}{right}"


def _number(value: float) -> str:
    """``value`` as written in a message: a whole number in full (``4294967295``), else ``:g``."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (compared with ``==``)."""

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        try:
            return any(type(value) is type(v) and value == v for v in self.values)
        except (TypeError, ValueError):
            return False

    def describe(self) -> str:
        """``one of ('a', 'b')``."""
        return f"one of {self.values!r}"


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` (NumPy booleans too), nothing else."""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is a boolean."""
        return isinstance(value, bool | np.bool_)

    def describe(self) -> str:
        """``True or False``."""
        return "True or False"


@dataclass(frozen=True)
class _Check:
    """Values that ``test`` accepts, described by ``text``."""

    test: Callable[[Any], bool]
    text: str

    def accepts(self, value: Any) -> bool:
        return self.test(value)

    def describe(self) -> str:
        return self.text


def _as_check(constraint: Any) -> Any:
    if constraint is None:
        return _Check(lambda value: value is None, "None")
    if constraint == "callable":
        return _Check(callable, "a callable")
    if isinstance(constraint, type):
        return _Check(lambda value: isinstance(value, constraint), f"a {constraint.__name__}")
    return constraint


def validate_params(
    owner: str, params: Mapping[str, Any], constraints: Mapping[str, Sequence[Any]]
) -> None:
    """Raise :class:`InvalidParameterError` for the first parameter no constraint accepts.

    Parameters
    ----------
    owner : str
        Who checks (a class or function name), the message's first word.
    params : mapping
        Parameter name to value; names absent from ``constraints`` are not checked.
    constraints : mapping
        Parameter name to the list of its accepted forms (any one suffices).
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        checks = [_as_check(c) for c in allowed]
        if any(check.accepts(value) for check in checks):
            continue
        what = " or ".join(check.describe() for check in checks)
        raise InvalidParameterError(f"{owner}: {name} must be {what}; got {name}={value!r}")


def column_labels(X: Any, n_features: int) -> list[str]:
    """Names to use in messages: the DataFrame's column names (``'a'``; ``column 1`` for a
    name that is not text), else ``column 0`` … ."""
    if isinstance(X, pd.DataFrame):
        return [repr(c) if isinstance(c, str) else f"column {c!r}" for c in X.columns]
    return [f"column {j}" for j in range(n_features)]


def check_finite_or_nan(X: Any, owner: str) -> None:
    """Refuse ``±inf``, naming the column and the first row holding one (its position, and a
    DataFrame's index label where that differs).

    Arrays that cannot be read as floats are left alone here: scikit-learn's own validation,
    which runs next, gives the standard error for them.
    """
    try:
        if isinstance(X, pd.DataFrame):
            values = X.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            raw = np.asarray(X)
            if raw.dtype.kind == "c":
                return  # scikit-learn's validation refuses complex data with its own message
            values = raw.astype(np.float64)
    except (TypeError, ValueError):
        return
    if values.ndim != 2:
        return
    infinite = np.isinf(values)
    if not infinite.any():
        return
    labels = column_labels(X, values.shape[1])
    j = int(np.flatnonzero(infinite.any(axis=0))[0])
    rows = np.flatnonzero(infinite[:, j])
    first = f"row {int(rows[0])}"
    if isinstance(X, pd.DataFrame) and X.index[rows[0]] != rows[0]:
        first += f", index {X.index[rows[0]]!r}"
    raise ValueError(
        f"{owner}: {labels[j]} holds {rows.size} infinite value(s) (first at {first}). "
        "Infinite values cannot be imputed or used: replace them with NaN to have them imputed, "
        "or with finite values."
    )


def parse_device(device: str | torch.device, owner: str) -> torch.device | None:
    """The device ``device`` names (``None`` for ``"auto"``), refused with a ``ValueError`` if
    it names none; whether this machine has it is not checked."""
    if isinstance(device, str) and device == "auto":
        return None
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{owner}: device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got device={device!r}"
        ) from err


def resolve_device(device: str | torch.device, owner: str) -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; any other value is checked."""
    resolved = parse_device(device, owner)
    if resolved is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{owner}: device={device!r} was asked for, but CUDA is not available on this "
            "machine; use device='auto' or 'cpu'."
        )
    return resolved


def resolve_dtype(dtype: str, owner: str) -> torch.dtype:
    """``"float32"`` or ``"float64"`` as a torch dtype."""
    validate_params(owner, {"dtype": dtype}, {"dtype": [Options(("float32", "float64"))]})
    return torch.float32 if dtype == "float32" else torch.float64


def store_params(estimator: object, params: dict[str, Any]) -> None:
    """Store every hyperparameter unchanged, as scikit-learn's contract asks of ``__init__``;
    ``params`` is the ``locals()`` of that ``__init__`` (``self`` is skipped)."""
    for name, value in params.items():
        if name != "self":
            setattr(estimator, name, value)
