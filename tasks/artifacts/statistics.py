"""The statistics artifact of a run: per imputed column, before and after imputation.

Markdown tables rather than a Prefect table artifact: a table artifact cannot align or format
numbers, and the UIs clip its columns and page its rows. Each statistic's before and after share
a cell, and the tables have few columns, so that they fit the UI's artifact page. Pure
functions, for tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from tasks.artifacts.markdown import code_span, format_number, format_value, table_cell
from tasks.drift import label_shares, largest_departure, share_distance
from tasks.frames import as_float_frame, holds_numbers, moments

__all__ = ["TOP_LABELS", "column_statistics", "statistics_markdown"]

TOP_LABELS = 3
"""How many of a labelled column's most common observed labels its row shows."""


def column_statistics(
    source: pd.DataFrame, imputed: pd.DataFrame, cells_imputed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """One row per imputed column: counts; for a numeric column, mean, std, min and max before
    and after imputation, the mean's shift in observed standard deviations, the std's
    relative change, and the std of the imputed cells alone (`std imputed`) with its ratio to
    the observed cells' (`imputed spread`: below 1, the imputed cells are less spread than the
    observed ones); for a boolean or categorical column, its label shares.

    "Before" describes the observed values of the source column (NULL left out), "after" the
    whole imputed column. `std` is the sample standard deviation (n - 1). A statistic that is
    not defined (the std of one value; a shift relative to a std of 0) is None.

    A labelled column's row holds `labels` (observed labels), `shares` (label: [share among the
    observed cells, share among the imputed cells or None], most common observed label first),
    `share distance` (total variation distance between the two shares, None without an imputed
    cell) and `largest departure` (the label whose share moved most, or None).
    """
    columns = [name for name in cells_imputed if holds_numbers(imputed[name])]
    before, after = as_float_frame(source, columns), as_float_frame(imputed, columns)
    rows: list[dict[str, Any]] = []
    for name in cells_imputed:
        given = source[name]
        row: dict[str, Any] = {
            "column": name,
            "observed": int(given.notna().sum()),
            "missing": int(given.isna().sum()),
            "imputed": int(cells_imputed[name]),
        }
        if name not in columns:
            rows.append(row | _label_statistics(given, imputed[name]))
            continue
        observed, filled = before[name].dropna(), after[name]
        for when, values in (("before", observed), ("after", filled)):
            mean, spread = moments(values)
            row[f"mean {when}"] = _number(mean)
            row[f"std {when}"] = _number(spread)
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
        imputed_std = _number(moments(filled[given.isna().to_numpy()])[1])
        row["std imputed"] = imputed_std
        row["imputed spread"] = imputed_std / std if std and imputed_std is not None else None
        rows.append(row)
    return rows


def _label_statistics(given: pd.Series, imputed: pd.Series) -> dict[str, Any]:
    missing = given.isna().to_numpy()
    observed = label_shares(given)
    filled = label_shares(imputed[missing]) if missing.any() else None
    ordered = sorted(observed, key=lambda label: (-observed[label], label))
    return {
        "labels": len(observed),
        "shares": {
            label: [observed.get(label, 0.0), None if filled is None else filled.get(label, 0.0)]
            for label in ordered + sorted(set(filled or ()) - set(observed))
        },
        "share distance": None if filled is None else share_distance(observed, filled),
        "largest departure": None if filled is None else largest_departure(observed, filled),
    }


def statistics_markdown(rows: list[dict[str, Any]], table: str) -> str:
    """The rows of :func:`column_statistics` as markdown narrow enough for the UI's artifact
    page (about 800 pixels at a window of 1,400; it neither wraps nor scrolls a table): for the
    numeric columns, a table of counts, mean and std, each as "before → after", and one of their
    ranges; for the labelled columns, a table of counts and label share distances, then a list
    of their most common labels, which wraps. Numbers are right-aligned."""
    numeric = [row for row in rows if "labels" not in row]
    labelled = [row for row in rows if "labels" in row]
    lines = [f"# Column statistics of {code_span(table)}"]
    if numeric:
        lines += [
            "",
            "Numeric columns, each statistic as before → after: before, the observed values of "
            "the column (NULL left out); after, the whole column once imputed. Numbers have 4 "
            "significant digits; the mean's shift is in standard deviations of the observed "
            "values; spread is the std of the imputed cells alone over that of the observed "
            "ones (below 1: the imputed cells are less spread than the data).",
            "",
            "| column | observed | imputed | mean | shift (sd) | std | spread |",
            "|---|" + "---:|" * 6,
        ]
        lines += [
            _row(
                row["column"],
                str(row["observed"]),
                str(row["imputed"]),
                _pair(row, "mean"),
                _signed(row["mean shift"], "{:+.3f}"),
                _pair(row, "std"),
                _signed(row["imputed spread"], "{:.2f}"),
            )
            for row in numeric
        ]
        lines += ["", "| column | min | max |", "|---|---:|---:|"]
        lines += [
            _row(row["column"], _pair(row, "min", format_value), _pair(row, "max", format_value))
            for row in numeric
        ]
    if labelled:
        lines += [
            "",
            "Text, enum and boolean columns: the distance between the label shares of the "
            "observed cells and of the imputed ones (total variation: 0 the same shares, 1 no "
            "label in common), and the label whose share moved most, as observed → imputed.",
            "",
            "| column | observed | imputed | labels | distance | largest departure |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for row in labelled:
            departure = row["largest departure"]
            lines.append(
                _row(
                    row["column"],
                    str(row["observed"]),
                    str(row["imputed"]),
                    str(row["labels"]),
                    _signed(row["share distance"], "{:.3f}"),
                    "n/a" if departure is None else _share(departure, row["shares"][departure]),
                )
            )
        lines += ["", f"The {TOP_LABELS} most common observed labels, observed → imputed:", ""]
        for row in labelled:
            shares = row["shares"]
            top = [_share(label, shares[label]) for label in list(shares)[:TOP_LABELS]]
            more = row["labels"] - TOP_LABELS
            listed = ", ".join(top) + (f", … ({more} more)" if more > 0 else "")
            lines.append(f"- {code_span(row['column'])}: {listed}")
    return "\n".join(lines)


def _row(column: str, *cells: str) -> str:
    """A markdown table row: the column's name as code, then `cells`."""
    return "| " + " | ".join(table_cell(c) for c in (code_span(column), *cells)) + " |"


def _pair(row: dict[str, Any], stat: str, shown: Callable[[float], str] = format_number) -> str:
    before, after = row[f"{stat} before"], row[f"{stat} after"]
    return " → ".join("n/a" if v is None else shown(v) for v in (before, after))


def _share(label: str, shares: list[float | None]) -> str:
    """`label` with its observed share, and its imputed share where there is one."""
    observed, imputed = shares
    text = f"{code_span(label)} {observed:.0%}"
    return text if imputed is None else f"{text} → {imputed:.0%}"


def _number(value: float) -> float | None:
    """`value` as a float; None for NaN (a statistic that is not defined)."""
    number = float(value)
    return number if math.isfinite(number) else None


def _signed(value: float | None, template: str) -> str:
    return template.format(value) if value is not None else "n/a"
