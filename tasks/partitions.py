"""Reading a table too large for one model fit: its profile, a fit sample, and row partitions.

Everything is computed inside DuckDB and read one partition at a time, so the flow's memory is
bounded by the sample and the partitions in flight, not by the table. Partitions are ranges of
DuckDB's `rowid` (the storage order of a base table), read through the connection that writes
the target, inside its transaction: every read sees the same snapshot of the source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from schemas.input import MAX_LABELS, MIN_ROWS, LabelCount
from tasks.bounds import table_bounds
from tasks.errors import PipelineInputError, setting
from tasks.frames import observed_labels
from tasks.load import SourceTable, _missing_table_message, count_nulls, untyped_columns
from tasks.quality import ObservedCells
from tasks.retry import warehouse_task
from tasks.validate import (
    ImputationPlan,
    LabelCounts,
    TableRequest,
    _resolve_key,
    _resolve_target,
    check_row_id,
    column_kinds,
    nan_problems,
    never_imputed,
    no_observed_value,
    resolve_columns,
    resolve_pass_through,
    too_few_rows,
)
from tasks.warehouse.names import quote_identifier
from tasks.warehouse.tables import (
    LABELLED,
    Fingerprint,
    TableInfo,
    columns_sql,
    connect,
    find_table,
    fingerprint_table,
)

__all__ = ["TableProfile", "count_rows", "partition_plan", "profile_table", "read_partition"]


@dataclass(frozen=True)
class TableProfile:
    """A large table, described without reading it whole: where it is, its columns and
    fingerprint, what will be imputed, the observed ranges, and its partitions."""

    db_path: str
    table: TableInfo
    fingerprint: Fingerprint
    plan: ImputationPlan
    observed: ObservedCells
    """The imputed columns' observed cells over the whole table, for the checks of a part."""
    moments: tuple[np.ndarray, np.ndarray]
    """Each numeric imputed column's mean and standard deviation over the whole table (as
    `tdm.scaling.fit_column_scaling` computes them, but in DuckDB)."""
    bounds: tuple[tuple[int, int], ...]
    """The partitions: rowid ranges [start, stop), in storage order."""

    def source(self, frame: pd.DataFrame) -> SourceTable:
        """A `SourceTable` of this table holding `frame` (a sample or a partition)."""
        return SourceTable(
            db_path=self.db_path, table=self.table, fingerprint=self.fingerprint, frame=frame
        )


@warehouse_task("count-rows")
def count_rows(db_path: str, table: str) -> int | None:
    """Rows of `table`, or None when there is no such table (the full load then says why)."""
    with connect(db_path, read_only=True) as con:
        info = find_table(con, table)
        if info is None:
            return None
        sql = f"SELECT count(*) FROM {info.sql}"
        return int(con.execute(sql).fetchall()[0][0])


def profile_table(
    con: duckdb.DuckDBPyConnection,
    db_path: str,
    request: TableRequest,
    *,
    target_suffix: str,
    partition_rows: int,
) -> TableProfile:
    """Resolve the requested columns, key and target; check the values in SQL; work out the
    bounds and observed labels; plan the partitions.

    Checked over the whole table: no `inf`, no NaN unless `request.nan_as_missing`, every column
    has an observed value, a text or enum column has at most `MAX_LABELS` labels, the key is
    unique and not null. Writing over the
    source is refused: its rows are read while the target is written.
    """
    info = find_table(con, request.source_table)
    if info is None:
        raise PipelineInputError(_missing_table_message(con, db_path, request.source_table))
    check_row_id(
        info,
        "incremental and partitioned runs",
        "impute it in one fit (no incremental run, at most TDM_MAX_FIT_ROWS rows)",
    )
    key_name = _resolve_key(info, request.key)
    passed = resolve_pass_through(info, request.pass_through)
    target_name = _resolve_target(info.qualified, request.target_table, False, target_suffix)
    src = info.sql
    counts, empty, n_all = _label_counts(con, info, nan_as_missing=request.nan_as_missing)
    mark = info.column(request.watermark) if request.watermark else None
    unchosen = passed if mark is None or request.columns else (*passed, mark.name)
    choice = resolve_columns(info, request.columns, key_name, unchosen, counts, n_all, empty)
    chosen = choice.chosen
    kinds = column_kinds(info, chosen)
    labelled = [name for name in chosen if kinds[name] in LABELLED]
    numeric = [name for name in chosen if name not in labelled]
    stats = []
    for name in numeric:
        cell = f"{quote_identifier(name)}::DOUBLE"
        stats.append(
            f"count({cell}) FILTER (WHERE NOT isnan({cell})), "
            f"count(*) FILTER (WHERE isinf({cell})), min({cell}), max({cell}), "
            f"count(*) FILTER (WHERE isnan({cell}))"
        )
    for name in labelled:
        cell = quote_identifier(name)
        stats.append(f"count({cell}), 0, count(DISTINCT {cell}), 0, 0")
    key = f"{quote_identifier(key_name)}::VARCHAR" if key_name else ""  # as rows are found
    key_sql = f", count({key}), count(DISTINCT {key})" if key_name else ""
    row = con.execute(
        f"SELECT count(*), min(rowid), max(rowid), {', '.join(stats)}{key_sql} FROM {src}"
    ).fetchall()[0]
    n_rows, first, last = int(row[0]), row[1], row[2]
    if n_rows < MIN_ROWS:  # as the whole table's validation says it, before any column's NULLs
        raise PipelineInputError(
            f'Table "{info.qualified}" cannot be imputed: {too_few_rows(n_rows)}. '
            "Nothing was written."
        )
    problems, missing, observed_range, labels, shares, nan_cells = [], {}, {}, {}, {}, {}
    for j, name in enumerate([*numeric, *labelled]):
        observed, infinite, low, high, nan_cells[name] = row[3 + 5 * j : 8 + 5 * j]
        if infinite:
            problems.append(f'column "{name}" has {infinite} infinite value{"s" * (infinite != 1)}')
        if not observed:
            problems.append(no_observed_value(name))
        missing[name] = n_rows - int(observed)
        if name in labelled and low > MAX_LABELS:
            problems.append(
                f'column "{name}" holds {low} distinct labels, more than the {MAX_LABELS} a '
                f"text or enum column may hold to be imputed: pass it through "
                f"({setting('pass_through')})"
            )
        elif name in labelled:
            labels[name], shares[name] = _labels(con, src, name)
        else:
            observed_range[name] = (float(low or 0.0), float(high or 0.0))
    if key_name:
        non_null, distinct = row[-2], row[-1]
        if non_null < n_rows:
            nulls = n_rows - non_null
            problems.append(f'key "{key_name}" has {nulls} null value{"s" * (nulls != 1)}')
        if distinct < non_null:
            problems.append(_duplicated_keys(con, src, key, key_name))
    if problems:
        raise PipelineInputError(
            f'Table "{info.qualified}" cannot be imputed: {"; ".join(problems)}. '
            "Nothing was written."
        )
    if not request.nan_as_missing and (nan := nan_problems(nan_cells, chosen)):
        raise PipelineInputError(f'Table "{info.qualified}" cannot be imputed: {nan}')
    found = table_bounds(
        info, numeric, observed_range, request.bounds, never_imputed(key_name, passed)
    )
    plan = ImputationPlan(
        source_table=info.qualified,
        target_table=target_name,
        columns=tuple(chosen),
        key=key_name,
        replace_source=False,
        n_rows=n_rows,
        missing={name: missing[name] for name in chosen},
        replace_target=request.replace_target,
        kinds=kinds,
        bounds=found.columns,
        labels=labels,
        pass_through=passed,
        left_out=choice.left_out,
        unobserved=choice.unobserved,
        ignored_checks=found.ignored_checks,
        untyped_nulls=count_nulls(con, info, untyped_columns(info, key_name)),
    )
    moments = _moments(con, src, numeric, observed_range)
    return TableProfile(
        db_path=str(db_path),
        table=info,
        fingerprint=fingerprint_table(con, info),
        plan=plan,
        observed=ObservedCells(
            observed_range,
            _stds(moments, observed_range),
            shares,
            n_rows,
            {name: n_rows - missing[name] for name in chosen},
        ),
        moments=moments,
        bounds=partition_plan(con, src, n_rows, first, last, partition_rows),
    )


def _label_counts(
    con: duckdb.DuckDBPyConnection, info: TableInfo, *, nan_as_missing: bool = False
) -> tuple[LabelCounts, list[str], int]:
    """The `LabelCount` of each boolean, text and enum column, the numeric and label columns
    whose every cell is NULL (or NaN, with `nan_as_missing`), and the table's rows: one scan
    for every column's labels and observed cells, and a grouping for the labels held once only
    where they decide (a column with a NULL and more than two labels)."""
    names = [c.name for c in info.columns if c.kind in LABELLED]
    numbers = [c.name for c in info.columns if c.is_numeric]
    held = "count({0}) FILTER (WHERE NOT isnan({0}::DOUBLE))" if nan_as_missing else "count({0})"
    counts = "".join(
        f", count(DISTINCT {quote_identifier(n)}), count({quote_identifier(n)})" for n in names
    ) + "".join(", " + held.format(quote_identifier(n)) for n in numbers)
    row = con.execute(f"SELECT count(*){counts} FROM {info.sql}").fetchall()[0]
    n_rows, found = int(row[0]), {}
    for j, name in enumerate(names):
        labels, observed = int(row[1 + 2 * j]), int(row[2 + 2 * j])
        once = 0
        if 0 < observed < n_rows and labels > 2:
            cell = quote_identifier(name)
            held = f"SELECT count(*) AS n FROM {info.sql} WHERE {cell} IS NOT NULL GROUP BY {cell}"
            once = con.execute(f"SELECT count(*) FROM ({held}) WHERE n = 1").fetchall()[0][0]
        found[name] = LabelCount(labels, observed, int(once))
    empty = [name for name, count in found.items() if not count.observed]
    observed = row[1 + 2 * len(names) :]
    empty += [name for name, count in zip(numbers, observed, strict=True) if not count]
    return found, empty if n_rows >= MIN_ROWS else [], n_rows  # else: refused for its rows


def _duplicated_keys(con: duckdb.DuckDBPyConnection, src: str, key: str, name: str) -> str:
    """How many values the key `name` (`key`: its SQL, as text) holds more than once, with the
    first few of them."""
    counted = (
        f"SELECT {key} AS k FROM {src} WHERE {key} IS NOT NULL GROUP BY ALL HAVING count(*) > 1"
    )
    query = f"SELECT count(*), list(k ORDER BY k)[1:5] FROM ({counted})"
    n, shown = con.execute(query).fetchall()[0]
    more = ", ..." if n > len(shown) else ""
    return (
        f'the key column "{name}" is not unique ({n} duplicated value{"s" * (n != 1)}, e.g. '
        f"{', '.join(shown)}{more})"
    )


def _labels(
    con: duckdb.DuckDBPyConnection, src: str, name: str
) -> tuple[tuple[object, ...], dict[str, float]]:
    """The distinct labels observed in a boolean, text or enum column, as `observed_labels`,
    and their shares (labels as text, as `tasks.drift.label_shares` gives them)."""
    cell = quote_identifier(name)
    frame = con.execute(
        f"SELECT {cell} AS v, count(*) AS n FROM {src} WHERE {cell} IS NOT NULL GROUP BY ALL"
    ).df()
    total = float(frame["n"].sum())
    shares = {str(v): float(n) / total for v, n in zip(frame["v"], frame["n"], strict=True)}
    return observed_labels(frame["v"]), shares


def _stds(
    moments: tuple[np.ndarray, np.ndarray], observed_range: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Each numeric column's standard deviation from `_moments`' scales: 0 for a constant one
    (which `_moments` scales by 1)."""
    return {
        name: float(scale) if low != high else 0.0
        for (name, (low, high)), scale in zip(observed_range.items(), moments[1], strict=True)
    }


def _moments(
    con: duckdb.DuckDBPyConnection,
    src: str,
    columns: Sequence[str],
    observed_range: dict[str, tuple[float, float]],
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (ddof=0) of each column's observed values, computed on the
    values divided by the column's largest magnitude so that no square overflows; a constant
    column gets scale 1 (the rules of `tdm.scaling.fit_column_scaling`)."""
    magnitude = np.array([max(abs(low), abs(high)) for low, high in observed_range.values()])
    magnitude[~(magnitude > 0) | ~np.isfinite(magnitude)] = 1.0
    sums = []
    for name, top in zip(columns, magnitude, strict=True):
        reduced = f"({quote_identifier(name)}::DOUBLE / {float(top)!r})"
        seen = f"FILTER (WHERE NOT isnan({reduced}))"
        sums.append(f"avg({reduced}) {seen}, stddev_pop({reduced}) {seen}")
    row = con.execute(f"SELECT {', '.join(sums)} FROM {src}").fetchall()[0]
    mean = np.array([row[2 * j] or 0.0 for j in range(len(columns))], dtype=np.float64)
    std = np.array([row[2 * j + 1] or 0.0 for j in range(len(columns))], dtype=np.float64)
    scale = std * magnitude
    scale[~(scale > 0) | ~np.isfinite(scale)] = 1.0
    return mean * magnitude, scale


def partition_plan(
    con: duckdb.DuckDBPyConnection, src: str, n_rows: int, first: int, last: int, size: int
) -> tuple[tuple[int, int], ...]:
    """Rowid ranges of about `size` rows each (equal shares, so no tiny last partition)."""
    if n_rows == 0:
        return ()
    count = math.ceil(n_rows / size)
    if last - first + 1 == n_rows:  # no gaps (no deleted rows): plain arithmetic
        edges = [first + (n_rows * i) // count for i in range(count)] + [last + 1]
    else:
        ranks = ", ".join(str((n_rows * i) // count) for i in range(count))
        starts = con.execute(
            f"SELECT r FROM (SELECT rowid AS r, row_number() OVER (ORDER BY rowid) - 1 AS i "
            f"FROM {src}) WHERE i IN ({ranks}) ORDER BY r"
        ).fetchall()
        edges = [int(s[0]) for s in starts] + [last + 1]
    return tuple((edges[i], edges[i + 1]) for i in range(count))


def read_sample(
    con: duckdb.DuckDBPyConnection, profile: TableProfile, rows: int, seed: int
) -> pd.DataFrame:
    """A reproducible uniform sample of `rows` rows (reservoir sampling in DuckDB)."""
    wanted = _wanted(profile)
    return con.execute(
        f"SELECT {columns_sql(wanted, profile.table, profile.plan.key)} FROM {profile.table.sql} "
        f"USING SAMPLE reservoir({int(rows)} ROWS) REPEATABLE ({int(seed)})"
    ).df()


def read_partition(
    con: duckdb.DuckDBPyConnection, profile: TableProfile, start: int, stop: int
) -> pd.DataFrame:
    """Rows with rowid in [start, stop), in storage order, indexed by rowid."""
    wanted = _wanted(profile)
    frame = con.execute(
        f"SELECT rowid AS __tdm_rowid, {columns_sql(wanted, profile.table, profile.plan.key)} "
        f"FROM {profile.table.sql} "
        f"WHERE rowid >= {int(start)} AND rowid < {int(stop)} ORDER BY rowid"
    ).df()
    frame.index = pd.Index(frame.pop("__tdm_rowid").to_numpy(dtype=np.int64), name="rowid")
    return frame


def _wanted(profile: TableProfile) -> list[str]:
    plan = profile.plan
    return ([plan.key] if plan.key else []) + list(plan.columns)
