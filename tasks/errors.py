"""Errors the pipeline raises on purpose: their message is the one paragraph users see."""

from __future__ import annotations

__all__ = ["PipelineError", "PipelineInputError", "QualityCheckError", "WarehouseBusyError"]


class PipelineError(Exception):
    """Base class: an expected failure whose message alone explains it (no traceback needed)."""


class PipelineInputError(PipelineError, ValueError):
    """The database, table, columns or parameters cannot be imputed as asked."""


class QualityCheckError(PipelineError):
    """The imputed table failed a quality check, so nothing was written."""


class WarehouseBusyError(PipelineError):
    """The DuckDB file is locked by another process; retrying later may succeed."""
