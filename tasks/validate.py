"""Validate step: decide what to impute and refuse, in one paragraph, what cannot be."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import pandera.errors
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.input import CHECK_FINITE, CHECK_MIN_ROWS, CHECK_OBSERVED, MIN_ROWS, input_schema
from schemas.lineage import IMPUTED_CELLS_TABLE, LINEAGE_TABLE
from tasks.errors import PipelineInputError, setting
from tasks.frames import as_float_frame
from tasks.load import SourceTable
from tasks.names import RESERVED_PREFIX, is_reserved, parse_table_name, same_table
from tasks.params import DEFAULT_TARGET_SUFFIX
from tasks.warehouse import TableInfo

__all__ = ["ImputationPlan", "validate_input"]


@dataclass(frozen=True)
class ImputationPlan:
    """What the run will do: which columns of which table it imputes, and where it writes.

    Table names are canonical (`tasks.names`): `table` in schema main, `schema.table` elsewhere.
    `replace_target`: an existing target the pipeline did not write (no lineage row names it)
    may be replaced; without it, such a target is refused.
    """

    source_table: str
    target_table: str
    columns: tuple[str, ...]
    key: str | None
    replace_source: bool
    n_rows: int
    missing: Mapping[str, int] = field(default_factory=dict)
    replace_target: bool = False

    @property
    def n_missing(self) -> int:
        """Cells to impute, over all chosen columns."""
        return sum(self.missing.values())


@task(name="validate-input", cache_policy=NO_CACHE)
def validate_input(
    source: SourceTable,
    columns: Sequence[str] | None = None,
    key: str | None = None,
    target: str | None = None,
    replace_source: bool = False,
    target_suffix: str = DEFAULT_TARGET_SUFFIX,
    replace_target: bool = False,
) -> ImputationPlan:
    """Check the chosen columns, the key and the target name; run the pandera input schema."""
    table = source.table
    target_name = _resolve_target(table.qualified, target, replace_source, target_suffix)
    key_name = _resolve_key(table, key)
    chosen = _resolve_columns(table, columns, key_name)
    values = _check_values(source, chosen, key_name)
    missing = {name: int(values[name].isna().sum()) for name in chosen}
    return ImputationPlan(
        source_table=table.qualified,
        target_table=target_name,
        columns=tuple(chosen),
        key=key_name,
        replace_source=replace_source,
        n_rows=source.fingerprint.rows,
        missing=missing,
        replace_target=replace_target,
    )


def _resolve_target(source: str, target: str | None, replace_source: bool, suffix: str) -> str:
    """The canonical target name; `source` is the source's canonical name (a default target
    `<source><suffix>` lies in the source's schema)."""
    if replace_source:
        if target is not None and not same_table(target, source):
            raise PipelineInputError(
                f'Asked to replace the source table "{source}" and also to write to "{target}": '
                f"choose one: leave out the target ({setting('target_table')}) to overwrite the "
                f"source, or leave out replace_source ({setting('replace_source')})."
            )
        name = source
    else:
        name = parse_table_name(target).canonical if target is not None else f"{source}{suffix}"
        if same_table(name, source):
            raise PipelineInputError(
                f'The target table "{name}" is the source table "{source}": the pipeline never '
                f"overwrites its source unless asked. Choose another target "
                f"({setting('target_table')}), or set replace_source "
                f"({setting('replace_source')}) to overwrite the source on purpose."
            )
    if is_reserved(name):
        raise PipelineInputError(
            f'The target table "{name}" is reserved: names starting with "{RESERVED_PREFIX}" are '
            f"the pipeline's own records ({LINEAGE_TABLE}, {IMPUTED_CELLS_TABLE}); choose "
            f"another target ({setting('target_table')})."
        )
    return name


def _resolve_key(table: TableInfo, key: str | None) -> str | None:
    if key is None:
        return None
    column = table.column(key)
    if column is None:
        raise PipelineInputError(
            f'The key column "{key}" does not exist in table "{table.qualified}". '
            f"Its columns are: {_names(c.name for c in table.columns)}."
        )
    kind = column.sql_type.upper()
    if kind.startswith(_NOT_KEY_TYPES) or kind.endswith("]"):
        raise PipelineInputError(
            f'The key column "{column.name}" of table "{table.qualified}" is {column.sql_type}, '
            "which cannot serve as a key: a key must hold single values that can be compared "
            f"exactly (integers up to HUGEINT, text, dates, UUIDs). Choose another key "
            f"({setting('key')}), or leave it out. Nothing was written."
        )
    return column.name


# Binary and nested types: their values cannot be compared as keys or written as row keys.
# UHUGEINT: DuckDB cannot hand its values to pandas exactly.
_NOT_KEY_TYPES = ("BLOB", "BYTEA", "BIT", "STRUCT", "MAP", "UNION", "UHUGEINT")


def _resolve_columns(table: TableInfo, columns: Sequence[str] | None, key: str | None) -> list[str]:
    if columns is None:
        chosen = [c.name for c in table.columns if c.is_numeric and c.name != key]
        if not chosen:
            raise PipelineInputError(
                f'Table "{table.qualified}" has no numeric column to impute '
                f"(columns: {_describe(table)})."
            )
        return chosen
    if not columns:
        raise PipelineInputError(
            f'No column to impute was given for table "{table.qualified}"; name at least one, '
            "or leave the columns out to impute every numeric column."
        )
    unknown = [name for name in columns if table.column(name) is None]
    if unknown:
        noun = "column does" if len(unknown) == 1 else "columns do"
        raise PipelineInputError(
            f'The {noun} not exist in table "{table.qualified}": {_names(unknown)}. '
            f"Its columns are: {_names(c.name for c in table.columns)}."
        )
    resolved = [table.column(name) for name in columns]
    not_numeric = [c for c in resolved if c is not None and not c.is_numeric]
    if not_numeric:
        listed = ", ".join(f'"{c.name}" ({c.sql_type})' for c in not_numeric)
        raise PipelineInputError(
            f'Only numeric columns can be imputed, but table "{table.qualified}" has non-numeric '
            f"{listed} among the chosen columns. Non-numeric columns pass through untouched; "
            f"leave them out of the columns ({setting('columns')})."
        )
    chosen = list(dict.fromkeys(c.name for c in resolved if c is not None))
    if key is not None and key in chosen:
        raise PipelineInputError(
            f'The key column "{key}" of table "{table.qualified}" cannot also be imputed: '
            f"leave it out of the columns ({setting('columns')})."
        )
    return chosen


def _check_values(source: SourceTable, columns: list[str], key: str | None) -> pd.DataFrame:
    """The chosen columns as floats, once the pandera input schema has accepted them."""
    values = as_float_frame(source.frame, columns)
    frame = values if key is None else values.assign(**{key: source.frame[key]})
    try:
        input_schema(columns, key, min_rows=MIN_ROWS).validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        problems = _describe_failures(errors.failure_cases, frame, key)
        raise PipelineInputError(
            f'Table "{source.table.qualified}" cannot be imputed: {"; ".join(problems)}. '
            "Nothing was written."
        ) from None
    return values


def _describe_failures(cases: pd.DataFrame, frame: pd.DataFrame, key: str | None) -> list[str]:
    """One clause per failed check, naming the column and the problem."""
    n_rows = len(frame)
    problems: list[str] = []
    checks = set(cases["check"].astype(str))
    if CHECK_MIN_ROWS in checks:
        problems.append(
            f"it has {n_rows} row{'s' if n_rows != 1 else ''}, and imputation needs at least "
            f"{MIN_ROWS}"
        )
        if n_rows == 0:
            return problems
    for (column, check), group in cases.groupby(["column", "check"], sort=False, dropna=True):
        column, check = str(column), str(check)
        if check == CHECK_FINITE:
            rows = sorted(int(i) for i in group["index"].dropna())
            problems.append(
                f'column "{column}" holds infinite values in {len(rows)} '
                f"row{'s' if len(rows) != 1 else ''} (0-based row numbers {_first(rows)}); "
                "TDM needs finite numbers: replace them with NULL to have them imputed"
            )
        elif check == CHECK_OBSERVED:
            problems.append(
                f'column "{column}" has no observed value (every cell is NULL), so there is '
                "nothing to learn it from: fill some values or leave it out of the columns "
                f"({setting('columns')})"
            )
        elif column == key and check == "not_nullable":
            problems.append(f'the key column "{column}" is NULL in {len(group)} rows')
        elif column == key and check == "field_uniqueness":
            dupes = frame[key][frame[key].duplicated(keep=False)].dropna().unique().tolist()
            problems.append(
                f'the key column "{column}" is not unique ({len(dupes)} duplicated '
                f"value{'s' if len(dupes) != 1 else ''}, e.g. {_first(dupes)})"
            )
        else:  # a check added to the schema without a sentence here
            problems.append(f'column "{column}" fails the check {check}')
    return problems


def _first(values: Sequence[object], limit: int = 5) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _names(names: Iterable[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _describe(table: TableInfo) -> str:
    return ", ".join(f'"{c.name}" {c.sql_type}' for c in table.columns) or "none"
