"""The statistics artifact of a run: per imputed column, before and after imputation.

A markdown table rather than a Prefect table artifact: a table artifact cannot align or format
numbers, and the UIs clip its columns and page its rows. Pure functions, for tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from pandas.api import types as ptypes

from tasks.artifacts.markdown import code_span, format_number, table_cell
from tasks.frames import as_float_frame

__all__ = ["column_statistics", "statistics_markdown"]


def column_statistics(
    source: pd.DataFrame, imputed: pd.DataFrame, cells_imputed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """One row per imputed column: counts; mean, std, min and max before and after imputation;
    the mean's shift in observed standard deviations and the std's relative change.

    "Before" describes the observed values of the source column (NULL left out), "after" the
    whole imputed column. `std` is the sample standard deviation (n - 1). A statistic that is
    not defined (the std of one value; a shift relative to a std of 0; any statistic of a
    boolean or categorical column, which gets its counts only) is None.
    """
    columns = [name for name in cells_imputed if _numeric(imputed[name])]
    before, after = as_float_frame(source, columns), as_float_frame(imputed, columns)
    rows: list[dict[str, Any]] = []
    for name in cells_imputed:
        if name not in columns:  # labels: counts only
            given = source[name]
            rows.append(
                {
                    "column": name,
                    "observed": int(given.notna().sum()),
                    "missing": int(given.isna().sum()),
                    "imputed": int(cells_imputed[name]),
                }
                | dict.fromkeys(_NUMBER_FIELDS)
            )
            continue
        observed, filled = before[name].dropna(), after[name]
        row: dict[str, Any] = {
            "column": name,
            "observed": len(observed),
            "missing": int(before[name].isna().sum()),
            "imputed": int(cells_imputed[name]),
        }
        for when, values in (("before", observed), ("after", filled)):
            row[f"mean {when}"] = _number(values.mean())
            row[f"std {when}"] = _number(values.std())
            row[f"min {when}"] = _number(values.min())
            row[f"max {when}"] = _number(values.max())
        std, mean_before, mean_after = row["std before"], row["mean before"], row["mean after"]
        row["mean shift"] = (
            (mean_after - mean_before) / std
            if std and mean_before is not None and mean_after is not None
            else None
        )
        row["std change"] = (
            row["std after"] / std - 1 if std and row["std after"] is not None else None
        )
        rows.append(row)
    return rows


_NUMBER_FIELDS = (
    *(f"{stat} {when}" for stat in ("mean", "std", "min", "max") for when in ("before", "after")),
    "mean shift",
    "std change",
)


def _numeric(column: pd.Series) -> bool:
    dtype = column.dtype
    return bool(ptypes.is_numeric_dtype(dtype) and not ptypes.is_bool_dtype(dtype))


def statistics_markdown(rows: list[dict[str, Any]], table: str) -> str:
    """The rows of :func:`column_statistics` as one markdown table, numbers right-aligned."""
    lines = [
        f"# Column statistics of {code_span(table)}",
        "",
        "Before: the observed values of each column (NULL left out); after: the whole column "
        "once imputed. Numbers have 4 significant digits; the mean's shift is in standard "
        "deviations of the observed values, the std's change in percent.",
        "",
        "| column | observed | imputed | mean before | mean after | mean shift (sd) "
        "| std before | std after | std change | range before | range after |",
        "|---|" + "---:|" * 10,
    ]
    for row in rows:
        cells = [
            table_cell(code_span(row["column"])),
            str(row["observed"]),
            str(row["imputed"]),
            _shown(row["mean before"]),
            _shown(row["mean after"]),
            _signed(row["mean shift"], "{:+.3f}"),
            _shown(row["std before"]),
            _shown(row["std after"]),
            _signed(row["std change"], "{:+.1%}"),
            f"{_shown(row['min before'])} … {_shown(row['max before'])}",
            f"{_shown(row['min after'])} … {_shown(row['max after'])}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value: float) -> float | None:
    """`value` as a float; None for NaN (a statistic that is not defined)."""
    number = float(value)
    return number if math.isfinite(number) else None


def _shown(value: float | None) -> str:
    return format_number(value) if value is not None else "n/a"


def _signed(value: float | None, template: str) -> str:
    return template.format(value) if value is not None else "n/a"
