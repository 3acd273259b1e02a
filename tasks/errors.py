"""Errors the pipeline raises on purpose: their message is the one paragraph users see."""

from __future__ import annotations

import gc
import traceback
from typing import Any

from pydantic import ValidationError

__all__ = [
    "ChangedMeanwhileError",
    "PipelineError",
    "PipelineInputError",
    "QualityCheckError",
    "WarehouseBusyError",
    "problem",
    "release_error",
    "release_frames",
    "setting",
    "validation_problems",
]

# How each setting a hint names is given, whichever way the run was started: a flow parameter
# (the Prefect UI, `tdm run`), a `tdm` flag, a warehouse config entry or a TDM_* variable.
_WAYS = {
    "db_path": "the db_path parameter or config field, the --db flag or TDM_DB_PATH",
    "target_table": "the target_table parameter, --target flag or a config entry's target",
    "key": "the key parameter, --key flag or a config entry's key",
    "watermark": "the watermark parameter, --watermark flag or a config entry's watermark",
    "columns": "the columns parameter, --columns flag or a config entry's columns",
    "pass_through": "the pass_through parameter, --pass-through flag or a config entry's "
    "pass_through",
    "bounds": "the bounds parameter or a config entry's bounds",
    "replace_source": "the replace_source parameter or --replace-source flag",
    "replace_target": "the replace_target parameter, --replace-target flag or "
    "TDM_REPLACE_TARGET=true",
    "nan_as_missing": "the nan_as_missing parameter, --nan-as-missing flag, a config entry's "
    "nan_as_missing or TDM_NAN_AS_MISSING=true",
    "refit": "the refit parameter or --refit flag",
    "tables": "the tables parameter or `tdm warehouse`'s --tables flag",
}


class PipelineError(Exception):
    """Base class: an expected failure whose message alone explains it (no traceback needed)."""


class PipelineInputError(PipelineError, ValueError):
    """The database, table, columns or parameters cannot be imputed as asked."""


class QualityCheckError(PipelineError):
    """The imputed table failed a quality check, so nothing was written."""


class WarehouseBusyError(PipelineError):
    """Another process holds the DuckDB file (locked) or wrote to what a run read meanwhile;
    retrying later may succeed (the run-level retries run the flow again)."""


class ChangedMeanwhileError(WarehouseBusyError):
    """Another process wrote to what a run read (its source, its model store) while it
    imputed: only the whole run, reading again, may succeed; not a step retried on what it read."""


def setting(name: str) -> str:
    """How to give the setting `name` (a flow parameter's name), in every way a run is started,
    for the hint of an error message: the same message serves the UI, `tdm` and configs."""
    return _WAYS[name]


def problem(error: Any) -> str:
    """One of a pydantic error's messages, without its "Value error, " prefix."""
    return str(error["msg"]).removeprefix("Value error, ")


def validation_problems(error: ValidationError) -> str:
    """A pydantic error as one line: `field: message; ...` (`value`: a top-level error)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {problem(e)}" for e in error.errors()
    )


def release_frames(error: BaseException) -> None:
    """Clear the local variables of the finished frames of `error`'s traceback and of the
    errors it chains, then collect garbage: the traceback still reads the same (files, lines,
    code), and the DuckDB connections those frames held are freed now, not reported as leaks
    when the process exits."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__
    gc.collect()


def release_error(error: BaseException | None) -> None:
    """Drop the tracebacks of `error` and of the errors it chains, then collect garbage, so that
    the DuckDB connections their frames held are freed now, not reported as leaks at exit."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__
    gc.collect()
