"""Errors the pipeline raises on purpose: their message is the one paragraph users see."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = [
    "PipelineError",
    "PipelineInputError",
    "QualityCheckError",
    "WarehouseBusyError",
    "validation_problems",
]


class PipelineError(Exception):
    """Base class: an expected failure whose message alone explains it (no traceback needed)."""


class PipelineInputError(PipelineError, ValueError):
    """The database, table, columns or parameters cannot be imputed as asked."""


class QualityCheckError(PipelineError):
    """The imputed table failed a quality check, so nothing was written."""


class WarehouseBusyError(PipelineError):
    """The DuckDB file is locked by another process; retrying later may succeed."""


def validation_problems(error: ValidationError, root: str = "value") -> str:
    """A pydantic error as one line: `field: message; ...` (`root` names a top-level error)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}" for e in error.errors()
    )
