"""Exact cells: imputed values cast to a column's type, observed cells proved unchanged in theirs.

TDM works on float64 and labels, but a warehouse column may hold values no double can (BIGINT
above 2**53, HUGEINT, UBIGINT, DECIMAL(38, s)). Observed cells are therefore never taken from
the imputed frame: they are copied by DuckDB, and checked afterwards in the source column's own
type. Every imputed column keeps its type: integers and DECIMALs are rounded to it, FLOAT to
single precision, labels are cast to their VARCHAR, ENUM or BOOLEAN column.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import pandas as pd

from tasks.bounds import OBSERVED
from tasks.errors import PipelineError, QualityCheckError, setting
from tasks.frames import as_labels, missing_mask
from tasks.load import SourceTable
from tasks.quality import CheckOutcome, QualityReport
from tasks.validate import ImputationPlan
from tasks.warehouse.constraints import CHECK, FOREIGN_KEY, broken_rows
from tasks.warehouse.names import quote_identifier, same_table
from tasks.warehouse.tables import (
    BOOLEAN,
    DECIMAL_TYPE,
    FLOAT,
    INTEGER,
    LABELLED,
    TableInfo,
    column_kind,
    type_range,
)

__all__ = [
    "FilledColumn",
    "add_checks",
    "check_alignment",
    "check_constraints",
    "filled_columns",
    "imputed_frame",
    "positional",
    "target_expression",
    "update_in_place",
    "verify_cells",
    "write_checks",
]


@dataclass(frozen=True)
class FilledColumn:
    """An imputed column: its name, SQL type, and position `j` in the registered frame (`c{j}`
    the imputed value, `m{j}` whether the cell is imputed); for an integer column bounded by
    its observed range, SQL giving that range's ends in the column's own type (`observed`)."""

    name: str
    sql_type: str
    j: int
    observed: tuple[str | None, str | None] = (None, None)

    @property
    def quoted(self) -> str:
        """The column's quoted name."""
        return quote_identifier(self.name)

    @property
    def kind(self) -> str:
        """ "float", "integer", "boolean" or "categorical" (`tasks.warehouse.column_kind`)."""
        return column_kind(self.sql_type) or FLOAT

    @property
    def labelled(self) -> bool:
        """Whether the column takes labels (boolean, text, enum) rather than numbers."""
        return self.kind in LABELLED


def filled_columns(source: SourceTable, plan: ImputationPlan) -> list[FilledColumn]:
    """The plan's columns with a missing cell, each with its SQL type (which it keeps)."""
    names = [name for name in plan.columns if plan.missing.get(name, 0)]
    filled = []
    for j, name in enumerate(names):
        column = source.table.column(name)
        sql_type = column.sql_type.upper() if column is not None else "DOUBLE"
        if column is not None and sql_type.startswith("ENUM("):
            sql_type = column.sql_type  # the labels keep their case
        bounds = plan.bounds.get(name)
        observed: tuple[str | None, str | None] = (None, None)
        exact = column_kind(sql_type) == INTEGER or DECIMAL_TYPE.fullmatch(sql_type)
        if bounds is not None and exact:
            whole = f"FROM {source.table.sql}"
            observed = (
                f"(SELECT min({quote_identifier(name)}) {whole})"
                if bounds.low_from == OBSERVED
                else None,
                f"(SELECT max({quote_identifier(name)}) {whole})"
                if bounds.high_from == OBSERVED
                else None,
            )
        filled.append(FilledColumn(name, sql_type, j, observed))
    return filled


def imputed_frame(
    source: SourceTable, plan: ImputationPlan, imputed: pd.DataFrame, filled: Sequence[FilledColumn]
) -> pd.DataFrame:
    """What is registered with DuckDB: per column `c{j}` (float64, or its labels) and `m{j}`
    (imputed), and the key as `k`. Positional names: user column names never reach SQL
    unquoted."""
    missing = missing_mask(source.frame, [c.name for c in filled])
    columns: dict[str, Any] = {}  # built whole: one column at a time fragments a wide frame
    for column in filled:
        values = imputed[column.name]
        if column.labelled:
            labels = as_labels(values, boolean=column.kind == BOOLEAN)
            cell: Any = labels.to_numpy(dtype=object)
            if column.kind == BOOLEAN:
                cell = pd.array(cell, dtype="boolean")
        else:
            cell = values.to_numpy(dtype="float64", na_value=float("nan"))
        columns[f"c{column.j}"] = cell
        columns[f"m{column.j}"] = missing[column.name].to_numpy()
    if plan.key is not None:
        columns["k"] = source.frame[plan.key].to_numpy()
    return pd.DataFrame(columns, index=range(len(imputed)))


def _fill_value(column: FilledColumn) -> str:
    """The imputed value of `column` in its SQL type (NULL where it does not fit the type).

    A double that equals a bound of the type once rounded to a double (2**64 for UBIGINT's
    greatest value 2**64 - 1) is that bound: the difference is float rounding, not the imputer.
    So is an integer or DECIMAL past an end of its observed range in the column's own type but
    not as a double (a BIGINT above 2**53 is not a double, nor is a DECIMAL(38, 10) of 18
    digits, which DuckDB's cast from a double may move further): it is set on that end.
    """
    value = f"i.c{column.j}"
    kind = column.sql_type
    if column_kind(kind) == INTEGER:
        value = f"round({value})"  # to the nearest integer, halves away from zero
    bounds = type_range(kind)
    if bounds is None:
        cast = f"TRY_CAST({value} AS {kind})"
    else:
        low, high = bounds
        cast = (
            f"CASE WHEN {value} = ({high})::DOUBLE THEN CAST(({high}) AS {kind}) "
            f"WHEN {value} = ({low})::DOUBLE THEN CAST(({low}) AS {kind}) "
            f"ELSE TRY_CAST({value} AS {kind}) END"
        )
    # Past an observed end in the column's type but not as doubles: on that end. A value past
    # it as a double too is left as it is, for the checks to refuse.
    low_end, high_end = column.observed
    cases = [
        f"WHEN ({cast}) {past} {end} AND {value} {within} ({end})::DOUBLE THEN {end}"
        for end, past, within in ((low_end, "<", ">="), (high_end, ">", "<="))
        if end is not None
    ]
    return f"CASE {' '.join(cases)} ELSE {cast} END" if cases else cast


def target_expression(column: FilledColumn) -> str:
    """SQL for the column in the target: the source cell where observed, else the imputed one.
    `s` is the source, `i` the registered frame."""
    return f"CASE WHEN i.m{column.j} THEN {_fill_value(column)} ELSE s.{column.quoted} END"


def write_checks(filled: Sequence[FilledColumn], n_observed: int) -> list[CheckOutcome]:
    """The checks a write made, for the lineage row: `n_observed` observed cells proved exact,
    and which columns' imputed cells were rounded to their type (if any)."""
    checks = [
        CheckOutcome(
            "observed_cells_exact",
            True,
            f"{n_observed} observed cells identical in their source types (checked in DuckDB)",
        )
    ]
    notes = []
    for column in filled:
        if column.labelled or column.sql_type == "DOUBLE":
            continue
        decimal = DECIMAL_TYPE.fullmatch(column.sql_type)
        if column.kind == INTEGER:
            how = "rounded to the nearest integer"
        elif decimal is not None:
            places = int(decimal.group(2))
            how = f"rounded to {places} decimal place{'s' * (places != 1)}"
        else:
            how = f"rounded to the nearest {column.sql_type}"
        notes.append(f'"{column.name}" kept its type {column.sql_type}: imputed cells {how}')
    if notes:
        checks.append(CheckOutcome("imputed_cell_types", True, "; ".join(notes)))
    return checks


def positional(before: str, after: str, view: str) -> str:
    """The FROM clause that lines up `before` (as `s`), `after` (`t`) and `view` (`i`) by
    position, for `verify_cells`."""
    return f"{before} AS s POSITIONAL JOIN {after} AS t POSITIONAL JOIN {view} AS i"


def verify_cells(
    con: duckdb.DuckDBPyConnection, table: str, rows: str, filled: Sequence[FilledColumn]
) -> int:
    """Every observed cell of the written rows `t` equals the source's `s` in the source type,
    bit for bit (compared as text, so that -0.0 differs from 0.0), and every imputed cell is set;
    raise if not. Returns how many observed cells were compared.

    `rows` is a FROM clause pairing each source row `s` with its written row `t` and its row
    `i` of the registered frame (`positional`, or joins on rowid)."""
    sums = []
    for column in filled:
        name = column.quoted
        exact = (
            f"s.{name}::VARCHAR IS DISTINCT FROM TRY_CAST(t.{name} AS {column.sql_type})::VARCHAR"
        )
        sums.append(f"count(*) FILTER (NOT i.m{column.j} AND {exact})")
        sums.append(f"count(*) FILTER (i.m{column.j} AND t.{name} IS NULL)")
        sums.append(f"count(*) FILTER (NOT i.m{column.j})")
    counts = con.execute(f"SELECT {', '.join(sums)} FROM {rows}").fetchall()[0]
    changed = [(c, counts[3 * n]) for n, c in enumerate(filled) if counts[3 * n]]
    unset = [(c, counts[3 * n + 1]) for n, c in enumerate(filled) if counts[3 * n + 1]]
    if changed:
        listed = ", ".join(f'"{c.name}" ({c.sql_type}): {k} cells' for c, k in changed)
        raise QualityCheckError(
            f'Writing table "{table}" would change observed cells ({listed}, compared in the '
            "column's own type), so nothing was written."
        )
    if unset:
        listed = ", ".join(f'"{c.name}" ({c.sql_type}): {k} cells' for c, k in unset)
        raise QualityCheckError(
            f'Imputed values of table "{table}" do not fit their column\'s type ({listed} out of '
            "its range), so nothing was written. Impute into another table, or widen the type."
        )
    return int(sum(counts[3 * n + 2] for n in range(len(filled))))


def check_constraints(
    con: duckdb.DuckDBPyConnection,
    source: TableInfo,
    target: str,
    filled: Sequence[FilledColumn],
    rows: str,
) -> None:
    """Refuse to write `rows` (a FROM item holding the table's columns) into `target` if they
    break a constraint of `source` that an imputed column is part of: a repeated PRIMARY KEY or
    UNIQUE value, a false CHECK, a FOREIGN KEY value its table lacks (`broken_rows`). The
    others hold already: the observed cells are the source's, and every imputed cell is set."""
    names = {column.name for column in filled}
    for constraint in source.constraints:
        imputed = [name for name in constraint.columns if name in names]
        sql = broken_rows(constraint, rows, source.schema) if imputed else None
        found = con.execute(sql).fetchall()[0][0] if sql is not None else 0
        if not found:
            continue
        if constraint.kind == FOREIGN_KEY and constraint.referenced is not None:
            what = f'rows whose value table "{constraint.referenced[0]}" lacks'
        elif constraint.kind == CHECK:
            what = "rows for which it is false"
        else:
            what = "values held by more than one row"
        listed = ", ".join(f'"{name}"' for name in imputed)
        kept = (
            "which an update in place keeps"
            if same_table(target, source.qualified)
            else f'which the target "{target}" must keep too'
        )
        raise QualityCheckError(
            f"The imputed values of {listed} break {constraint.text} of table "
            f'"{source.qualified}" ({what}: {found}), {kept}, so nothing was written. Pass the '
            f"column through with its NULLs ({setting('pass_through')})."
        )


def check_alignment(
    con: duckdb.DuckDBPyConnection, plan: ImputationPlan, filled: Sequence[FilledColumn], rows: str
) -> None:
    """Refuse to write if the imputed rows do not line up with the source rows: the same cells
    missing, observed values equal up to float rounding (the frame went through float64), and
    the same keys (labels equal as text). `rows` pairs each source row `s` with its row `i` of
    the registered frame."""
    counts = []
    for column in filled:
        cell = f"s.{column.quoted}"
        missing = f"{cell} IS NULL"
        if column.sql_type in ("FLOAT", "DOUBLE"):
            missing = f"({missing} OR isnan({cell}))"
        if column.labelled:
            differs = f"{cell}::VARCHAR IS DISTINCT FROM i.c{column.j}::VARCHAR"
        else:
            value = f"{cell}::DOUBLE"
            differs = f"abs({value} - i.c{column.j}) > 1e-12 * abs({value})"
        counts.append(
            f"count(*) FILTER (({missing}) <> i.m{column.j} OR (NOT i.m{column.j} AND {differs}))"
        )
    if plan.key is not None:
        key = f"s.{quote_identifier(plan.key)}::VARCHAR"  # the key is read as its text
        counts.append(f"count(*) FILTER ({key} IS DISTINCT FROM i.k)")
    if not counts:
        return
    found = con.execute(f"SELECT {', '.join(counts)} FROM {rows}").fetchall()[0]
    names = [c.name for c in filled] + ([plan.key] if plan.key is not None else [])
    off = [f'"{name}" ({n} rows)' for name, n in zip(names, found, strict=True) if n]
    if off:
        raise QualityCheckError(
            f'The imputed rows of "{plan.source_table}" do not line up with the table: '
            f"{', '.join(off)} differ in observed cells or keys, so nothing was written."
        )


def update_in_place(
    con: duckdb.DuckDBPyConnection,
    plan: ImputationPlan,
    src: str,
    view: str,
    filled: Sequence[FilledColumn],
) -> int:
    """UPDATE the source's missing cells, matched by rowid, each cast to its column's type: the
    table's definition (constraints, defaults, indexes, types) stays as it was.

    The new values are computed and proved first (DuckDB moves a row whose indexed column is
    updated, so rows cannot be matched by position afterwards); after the UPDATE, each column's
    values must be, as a multiset, the ones proved. Returns how many observed cells were proved
    unchanged."""
    fill = f"tdm_fill_{view.rsplit('_', 1)[1]}"
    values = ", ".join(
        f"s.{c.quoted} AS o{c.j}, CASE WHEN i.m{c.j} THEN {_fill_value(c)} ELSE s.{c.quoted} END "
        f"AS e{c.j}, i.m{c.j}"
        for c in filled
    )
    con.execute(
        f"CREATE TEMP TABLE {fill} AS SELECT s.rowid AS tdm_row, {values} "
        f"FROM {src} AS s POSITIONAL JOIN {view} AS i"
    )
    try:
        before = f"(SELECT {', '.join(f'o{c.j} AS {c.quoted}' for c in filled)} FROM {fill})"
        after = f"(SELECT {', '.join(f'e{c.j} AS {c.quoted}' for c in filled)} FROM {fill})"
        n_observed = verify_cells(con, plan.source_table, positional(before, after, fill), filled)
        sets = ", ".join(f"{c.quoted} = i.e{c.j}" for c in filled)
        any_missing = " OR ".join(f"i.m{c.j}" for c in filled)
        try:
            con.execute(
                f"UPDATE {src} SET {sets} FROM {fill} AS i "
                f"WHERE {src}.rowid = i.tdm_row AND ({any_missing})"
            )
        except duckdb.ConstraintException as error:
            raise PipelineError(
                f'The imputed values break a constraint of table "{plan.source_table}", which '
                "an update in place keeps, so nothing was written: "
                f"{str(error).splitlines()[0].rstrip('.')}. Pass the column it names through with "
                f"its NULLs ({setting('pass_through')})."
            ) from None
        for c in filled:
            _check_same_values(con, plan.source_table, f"(SELECT {c.quoted} FROM {src})", fill, c)
        return n_observed
    finally:
        with contextlib.suppress(duckdb.Error):  # an aborted transaction drops it with itself
            con.execute(f"DROP TABLE IF EXISTS temp.{fill}")


def _check_same_values(
    con: duckdb.DuckDBPyConnection, table: str, updated: str, fill: str, column: FilledColumn
) -> None:
    """Refuse if the updated column does not hold, as a multiset, the values proved in `fill`."""

    def digest(sql: str) -> tuple:
        text = "coalesce(v::VARCHAR, '<NULL>')"
        return con.execute(
            f"SELECT count(*), sum(hash({text})), bit_xor(hash({text})) FROM {sql} AS u(v)"
        ).fetchall()[0]

    if digest(updated) != digest(f"(SELECT e{column.j} FROM {fill})"):
        raise PipelineError(
            f'Updating column "{column.name}" of table "{table}" in place did not give the '
            "values that were checked, so nothing was written."
        )


def add_checks(report: QualityReport, checks: Sequence[CheckOutcome]) -> QualityReport:
    """`report` with `checks` appended (the checks made while writing, for the lineage row)."""
    return replace(report, checks=report.checks + tuple(checks))
