"""Validate step: decide what to impute and refuse, in one paragraph, what cannot be."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import pandas as pd
import pandera.errors
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.input import (
    CHECK_FINITE,
    CHECK_LABELS,
    CHECK_MIN_ROWS,
    CHECK_OBSERVED,
    MAX_COLUMNS,
    MAX_LABELS,
    MIN_ROWS,
    LabelCount,
    input_schema,
)
from schemas.lineage import IMPUTED_CELLS_TABLE, LINEAGE_TABLE
from tasks.bounds import ColumnBounds, table_bounds
from tasks.errors import PipelineInputError, setting
from tasks.frames import as_float_frame, observed_labels
from tasks.load import SourceTable
from tasks.warehouse.names import (
    DEFAULT_TARGET_SUFFIX,
    RESERVED_PREFIX,
    is_reserved,
    parse_table_name,
    same_table,
)
from tasks.warehouse.tables import FLOAT, LABELLED, TableInfo

__all__ = [
    "ColumnChoice",
    "ImputationPlan",
    "LabelCounts",
    "TableRequest",
    "check_row_id",
    "column_kinds",
    "nan_problems",
    "never_imputed",
    "no_observed_value",
    "not_imputed_notes",
    "plan_notes",
    "resolve_columns",
    "resolve_pass_through",
    "validate_input",
]

BoundsConfig = Mapping[str, Sequence[float | None]]
"""Bounds given per column name: [low, high], either end None (open)."""


@dataclass(frozen=True)
class TableRequest:
    """Which table to impute: its columns (None: every numeric one, and the text, enum and boolean
    ones `LabelCount.imputed_by_default` takes, but the key and the `pass_through` ones), its key,
    the target (None: the source name plus the target suffix, or the source itself), bounds per
    numeric column ([low, high], None: open) that replace the observed range, and whether NaN values
    are imputed as missing cells (`nan_as_missing`; otherwise a column to impute that holds one is
    refused). `watermark`: the column an incremental run tells new rows by, left out of the
    default columns like the key (named among `columns`, it is refused by the run)."""

    source_table: str
    columns: Sequence[str] | None = None
    key: str | None = None
    target_table: str | None = None
    replace_source: bool = False
    replace_target: bool = False
    pass_through: Sequence[str] | None = None
    bounds: Mapping[str, Sequence[float | None]] | None = None
    nan_as_missing: bool = False
    watermark: str | None = None


@dataclass(frozen=True)
class ImputationPlan:
    """What the run will do: which columns of which table it imputes, and where it writes.

    Table names are canonical (`tasks.warehouse.names`): `table` in schema main, `schema.table`
    elsewhere. `replace_target`: an existing target the pipeline did not write (no lineage row names
    it) may be replaced; without it, such a target is refused. `kinds` says how each column is
    imputed ("float", "integer", "boolean", "categorical"; a column not in it is "float"), `bounds`
    the range of each numeric column's imputed values (`tasks.bounds`), `labels` the labels observed
    in each boolean or categorical column (its imputed cells take one of them). `left_out`: the
    label columns with a NULL that the default columns leave out (`resolve_columns`).
    `untyped_nulls`: the NULLs of each column of a type the pipeline does not impute (DATE,
    TIMESTAMP, BLOB, ...; the key aside) that has some: they stay NULL. `unobserved`: the
    columns the default columns leave out because every cell is NULL (nothing to learn them
    from): they stay NULL.
    """

    source_table: str
    target_table: str
    columns: tuple[str, ...]
    key: str | None
    replace_source: bool
    n_rows: int
    missing: Mapping[str, int] = field(default_factory=dict)
    replace_target: bool = False
    kinds: Mapping[str, str] = field(default_factory=dict)
    bounds: Mapping[str, ColumnBounds] = field(default_factory=dict)
    labels: Mapping[str, tuple[object, ...]] = field(default_factory=dict)
    pass_through: tuple[str, ...] = ()
    ignored_checks: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()
    untyped_nulls: Mapping[str, int] = field(default_factory=dict)
    unobserved: tuple[str, ...] = ()

    @property
    def n_missing(self) -> int:
        """Cells to impute, over all chosen columns."""
        return sum(self.missing.values())

    def kind(self, column: str) -> str:
        """How `column` is imputed: "float", "integer", "boolean" or "categorical"."""
        return self.kinds.get(column, FLOAT)

    @property
    def labelled(self) -> tuple[str, ...]:
        """The boolean and categorical columns (imputed with observed labels)."""
        return tuple(c for c in self.columns if c in self.labels)


@task(name="validate-input", cache_policy=NO_CACHE)
def validate_input(
    source: SourceTable,
    columns: Sequence[str] | None = None,
    key: str | None = None,
    target: str | None = None,
    replace_source: bool = False,
    target_suffix: str = DEFAULT_TARGET_SUFFIX,
    replace_target: bool = False,
    pass_through: Sequence[str] | None = None,
    bounds: BoundsConfig | None = None,
    nan_as_missing: bool = False,
) -> ImputationPlan:
    """Check the chosen columns, the key and the target name; run the pandera input schema;
    work out each numeric column's bounds and each labelled column's observed labels. A chosen
    column holding NaN is refused unless `nan_as_missing` (`nan_problems`)."""
    table = source.table
    target_name = _resolve_target(table.qualified, target, replace_source, target_suffix)
    if replace_source:
        check_row_id(table, "an update in place", f"leave out {setting('replace_source')}")
    key_name = _resolve_key(table, key)
    passed = resolve_pass_through(table, pass_through)
    frame = source.frame
    counts = {
        c.name: label_count(frame[c.name])
        for c in table.columns
        if c.kind in LABELLED and c.name in frame
    }
    empty = [  # none in a table too small to impute: that is its refusal
        c.name
        for c in table.columns
        if len(frame) >= MIN_ROWS
        and c.name in frame
        and frame[c.name].isna().all()
        and (nan_as_missing or not source.nan_cells.get(c.name))  # else NaN is refused
    ]
    choice = resolve_columns(table, columns, key_name, passed, counts, len(frame), empty)
    chosen = choice.chosen
    if not nan_as_missing and (problems := nan_problems(source.nan_cells, chosen)):
        raise PipelineInputError(f'Table "{table.qualified}" cannot be imputed: {problems}')
    kinds = column_kinds(table, chosen)
    labelled = [name for name in chosen if kinds[name] in LABELLED]
    values = _check_values(source, chosen, key_name, labelled)
    numeric = [name for name in chosen if name not in labelled]
    observed = {name: (float(values[name].min()), float(values[name].max())) for name in numeric}
    found = table_bounds(table, numeric, observed, bounds, never_imputed(key_name, passed))
    return ImputationPlan(
        source_table=table.qualified,
        target_table=target_name,
        columns=tuple(chosen),
        key=key_name,
        replace_source=replace_source,
        n_rows=source.fingerprint.rows,
        missing={name: int(values[name].isna().sum()) for name in chosen},
        replace_target=replace_target,
        kinds=kinds,
        bounds=found.columns,
        labels={name: observed_labels(values[name]) for name in labelled},
        pass_through=passed,
        ignored_checks=found.ignored_checks,
        left_out=choice.left_out,
        untyped_nulls=source.untyped_nulls,
        unobserved=choice.unobserved,
    )


def too_few_rows(n_rows: int) -> str:
    """The clause refusing a table of fewer than `MIN_ROWS` rows."""
    return (
        f"it has {n_rows} row{'s' if n_rows != 1 else ''}, and imputation needs at least {MIN_ROWS}"
    )


def no_observed_value(column: str) -> str:
    """The clause refusing a column to impute whose every cell is NULL, with what to do."""
    return (
        f'column "{column}" has no observed value (every cell is NULL), so there is nothing to '
        f"learn it from: pass it through with its NULLs ({setting('pass_through')}), leave it "
        f"out of the columns you named ({setting('columns')}), or fill some values"
    )


def nan_problems(nan_cells: Mapping[str, int], columns: Sequence[str]) -> str:
    """The clause refusing the NaN values of `columns` (empty when none holds one), with what to
    do: in DuckDB NaN is a value, not missing, so it is neither kept nor imputed silently."""
    found = [f'"{name}" ({nan_cells[name]})' for name in columns if nan_cells.get(name)]
    if not found:
        return ""
    return (
        f"NaN values in {', '.join(found)}; DuckDB keeps NaN as a value, not as missing (NULL), "
        "so they are not overwritten. Nothing was written. Replace them with NULL, pass the "
        f"column through ({setting('pass_through')}), or impute them as missing cells "
        f"({setting('nan_as_missing')})."
    )


def plan_notes(plan: ImputationPlan) -> list[str]:
    """Lines for the run's log: each imputed column's kind and bounds or labels, the complete
    label columns (inputs only), the columns left as they are (`not_imputed_notes`), and the
    CHECK constraints not used for bounds."""
    notes = []
    for name in plan.columns:
        if not plan.missing.get(name):
            continue
        if name in plan.bounds:
            what = f"{plan.kind(name)}, bounds {plan.bounds[name].describe()}"
        else:
            n_labels = len(plan.labels.get(name, ()))
            what = f"{plan.kind(name)}, {n_labels} observed label{'s' * (n_labels != 1)}"
        n = plan.missing[name]
        notes.append(f'\n  "{name}": {n} cell{"s" * (n != 1)}, {what}')
    lines = [f'Columns of "{plan.source_table}" to impute:' + "".join(notes)] if notes else []
    if complete := [name for name in plan.labelled if not plan.missing.get(name)]:
        lines.append(
            "Complete label columns, inputs of the imputation (nothing to impute): "
            + _names(complete)
        )
    lines += not_imputed_notes(plan)
    lines += [
        f'CHECK {check} of "{plan.source_table}" is not a simple bound (column compared with '
        "a number, BETWEEN), so it is not used for bounds; an imputed value that breaks it is "
        "refused when written, since the target keeps it"
        for check in plan.ignored_checks
    ]
    return lines


def not_imputed_notes(plan: ImputationPlan) -> list[str]:
    """Sentences naming the columns the run leaves as they are, NULLs included, and why: passed
    through, of a type the pipeline does not impute, identifiers or free text, every cell NULL
    (for the run's log and its report)."""
    lines = []
    if plan.pass_through:
        lines.append(f"Passed through with their NULLs: {_names(plan.pass_through)}")
    if plan.untyped_nulls:
        counts = ", ".join(
            f'"{name}" ({n} NULL{"s" * (n != 1)})' for name, n in plan.untyped_nulls.items()
        )
        lines.append(
            f"Left with their NULLs, as the pipeline imputes no column of their type: {counts}"
        )
    if plan.left_out:
        lines.append(
            f"Left out with their NULLs, as identifiers or free text (most of their labels are "
            f"held by one cell, so no label can be learned for the others): "
            f"{_names(plan.left_out)}. Name them in the columns to impute them "
            f"({setting('columns')})."
        )
    if plan.unobserved:
        lines.append(
            f"Left with their NULLs, as every cell is NULL (no value to learn them from): "
            f"{_names(plan.unobserved)}"
        )
    return lines


ROW_ID_NAMES = ("rowid", "tdm_row", "__tdm_rowid")
"""Column names that DuckDB's row id or the pipeline's own name for it would clash with."""


def check_row_id(table: TableInfo, why: str, instead: str) -> None:
    """Refuse a table with a column named as DuckDB's row id (`rowid`, which then hides it) or
    as the pipeline's own name for it: `why` (an update in place, an incremental or a
    partitioned run) finds the table's rows by that row id; `instead`: what else to do."""
    clashes = [c.name for c in table.columns if c.name.lower() in ROW_ID_NAMES]
    if clashes:
        raise PipelineInputError(
            f'Table "{table.qualified}" has a column named "{clashes[0]}", which clashes with '
            f"DuckDB's row id, used by {why} to find the table's rows, so nothing was written: "
            f'rename the column (ALTER TABLE {table.sql} RENAME COLUMN "{clashes[0]}" TO ...), '
            f"or {instead}."
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


def never_imputed(key: str | None, pass_through: Sequence[str]) -> dict[str, str]:
    """The columns a run never imputes, each with what it is (for `table_bounds`)."""
    found = {name: "passed through" for name in pass_through}
    return found | ({key: "the key"} if key is not None else {})


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


def resolve_pass_through(table: TableInfo, names: Sequence[str] | None) -> tuple[str, ...]:
    """The stored names of the columns to pass through (their NULLs kept); refuse unknown ones."""
    if not names:
        return ()
    unknown = [name for name in names if table.column(name) is None]
    if unknown:
        raise PipelineInputError(
            f'The pass-through columns name no column of table "{table.qualified}": '
            f"{_names(unknown)} ({setting('pass_through')}). Its columns are: "
            f"{_names(c.name for c in table.columns)}."
        )
    return tuple(dict.fromkeys(c.name for c in map(table.column, names) if c is not None))


LabelCounts = Mapping[str, LabelCount]
"""Per text, enum or boolean column: its labels, observed cells and labels held once."""


def label_count(series: pd.Series) -> LabelCount:
    """The `LabelCount` of a text, enum or boolean column."""
    held = series.value_counts(dropna=True)
    return LabelCount(len(held), int(held.sum()), int((held == 1).sum()))


class ColumnChoice(NamedTuple):
    """The columns to impute (`chosen`), and those the default columns leave with their NULLs:
    identifiers or free text (`left_out`), columns whose every cell is NULL (`unobserved`)."""

    chosen: list[str]
    left_out: tuple[str, ...]
    unobserved: tuple[str, ...]


def resolve_columns(
    table: TableInfo,
    columns: Sequence[str] | None,
    key: str | None,
    pass_through: Sequence[str],
    counts: LabelCounts,
    n_rows: int,
    empty: Collection[str] = (),
) -> ColumnChoice:
    """The stored names of the columns to impute: `columns`, or by default every numeric column and
    the text, enum and boolean columns `LabelCount.imputed_by_default` takes by their `counts` over
    the `n_rows` rows, but the key, the `pass_through`, the generated columns, the identifiers (a
    column that is a PRIMARY KEY or UNIQUE on its own: passed through unless named) and the
    columns `empty` of any observed cell; at most `MAX_COLUMNS` of them. And the label columns
    with a NULL the default leaves out as `LabelCount.mostly_distinct`, and the empty ones it
    leaves out (none when the columns are named: a named empty column is refused)."""

    def by_default(name: str) -> bool:
        return name in counts and counts[name].imputed_by_default(n_rows)

    default = columns is None
    chosen = _chosen_columns(table, columns, key, pass_through, by_default, set(empty))
    if len(chosen) > MAX_COLUMNS:
        raise PipelineInputError(
            f'Table "{table.qualified}" has {len(chosen):,} columns to impute; one run imputes '
            f"at most {MAX_COLUMNS} together (beyond that the start takes hours and the fit can "
            f"diverge). Choose the columns ({setting('columns')}), pass the others through "
            f"({setting('pass_through')}), or split the table."
        )
    candidates = [
        c
        for c in table.columns
        if default and c.name not in (key, *pass_through, *table.identifiers)
    ]
    left_out = tuple(
        c.name
        for c in candidates
        if c.name in counts
        and 0 < counts[c.name].observed < n_rows
        and counts[c.name].mostly_distinct
    )
    unobserved = tuple(
        c.name
        for c in candidates
        if c.name in empty and (c.is_numeric or c.name in counts) and c.generated is None
    )
    return ColumnChoice(chosen, left_out, unobserved)


def _chosen_columns(
    table: TableInfo,
    columns: Sequence[str] | None,
    key: str | None,
    pass_through: Sequence[str],
    by_default: Callable[[str], bool],
    empty: Collection[str],
) -> list[str]:
    if columns is None:
        chosen = [
            c.name
            for c in table.columns
            if c.name != key
            and c.name not in pass_through
            and c.name not in table.identifiers
            and c.name not in empty
            and (c.is_numeric or (c.kind is not None and by_default(c.name)))
        ]
        if not chosen and (held := [c.name for c in table.columns if c.name in empty]):
            raise PipelineInputError(
                f'Table "{table.qualified}" has no column to impute: no cell of {_names(held)} '
                "holds a value to learn from, and no other numeric column, nor text, enum or "
                "boolean column with a NULL or with few labels, remains besides the key and "
                f"the columns passed through (columns: {_describe(table)}). Nothing was written."
            )
        if not chosen:
            raise PipelineInputError(
                f'Table "{table.qualified}" has no column to impute: no numeric column, and no '
                "text, enum or boolean column with a NULL or with few labels, that is not the "
                f"key or passed through (columns: {_describe(table)})."
            )
        return chosen
    if not columns:
        raise PipelineInputError(
            f'No column to impute was given for table "{table.qualified}"; name at least one, '
            "or leave the columns out to impute every numeric column and every text, enum or "
            "boolean column with a NULL (those with few labels inform the fit)."
        )
    unknown = [name for name in columns if table.column(name) is None]
    if unknown:
        noun = "column does" if len(unknown) == 1 else "columns do"
        raise PipelineInputError(
            f'The {noun} not exist in table "{table.qualified}": {_names(unknown)} '
            f"({setting('columns')}). Its columns are: {_names(c.name for c in table.columns)}."
        )
    resolved = [c for c in map(table.column, columns) if c is not None]
    generated = [c for c in resolved if c.generated is not None]
    if generated:
        listed = ", ".join(f'"{c.name}" AS ({c.generated})' for c in generated)
        raise PipelineInputError(
            f'Table "{table.qualified}" computes {listed} from its other columns: a generated '
            "column is computed, not imputed (its cells follow the imputed ones). Leave it out "
            f"of the columns ({setting('columns')})."
        )
    unusable = [c for c in resolved if c.kind is None]
    if unusable:
        listed = ", ".join(f'"{c.name}" ({c.sql_type})' for c in unusable)
        raise PipelineInputError(
            f"Only numeric, text (VARCHAR), ENUM and BOOLEAN columns can be imputed, but table "
            f'"{table.qualified}" has {listed} among the chosen columns. Other columns pass '
            f"through untouched; leave them out of the columns ({setting('columns')})."
        )
    chosen = list(dict.fromkeys(c.name for c in resolved))
    if key is not None and key in chosen:
        raise PipelineInputError(
            f'The key column "{key}" of table "{table.qualified}" cannot also be imputed: '
            f"leave it out of the columns ({setting('columns')})."
        )
    both = [name for name in chosen if name in pass_through]
    if both:
        raise PipelineInputError(
            f'Columns of table "{table.qualified}" are named both to impute and to pass '
            f"through: {_names(both)}. Leave them out of the columns ({setting('columns')}) or "
            f"of the pass-through columns ({setting('pass_through')})."
        )
    return chosen


def column_kinds(table: TableInfo, names: Sequence[str]) -> dict[str, str]:
    """How each of the named columns is imputed ("float" where the table says nothing)."""
    kinds = {}
    for name in names:
        column = table.column(name)
        kinds[name] = (column.kind if column is not None else None) or FLOAT
    return kinds


def _check_values(
    source: SourceTable, columns: list[str], key: str | None, labelled: Sequence[str]
) -> pd.DataFrame:
    """The chosen columns (numeric ones as floats, the others as read), once the pandera input
    schema has accepted them."""
    numeric = [name for name in columns if name not in labelled]
    floats = as_float_frame(source.frame, numeric)
    values = pd.DataFrame(
        {name: floats[name] if name in floats else source.frame[name] for name in columns},
        index=source.frame.index,
    )
    frame = values if key is None else values.assign(**{key: source.frame[key]})
    schema = input_schema(columns, key, min_rows=MIN_ROWS, labelled=labelled)
    try:
        schema.validate(frame, lazy=True)
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
        problems.append(too_few_rows(n_rows))
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
        elif check == CHECK_LABELS:
            labels = int(frame[column].nunique(dropna=True))
            problems.append(
                f'column "{column}" holds {labels} distinct labels, more than the {MAX_LABELS} '
                "a text or enum column may hold to be imputed (it looks like an identifier or "
                f"free text): pass it through ({setting('pass_through')}) to keep its NULLs"
            )
        elif check == CHECK_OBSERVED:
            problems.append(no_observed_value(column))
        elif column == key and check == "not_nullable":
            rows = f"{len(group)} row{'s' if len(group) != 1 else ''}"
            problems.append(f'the key column "{column}" is NULL in {rows}')
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
    shown = ", ".join(_value(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _value(value: object) -> str:
    """A cell as the user wrote it: a DATE (read as a midnight timestamp) without its time."""
    if isinstance(value, pd.Timestamp) and value == value.normalize():
        return str(value.date())
    return str(value)


def _names(names: Iterable[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _describe(table: TableInfo) -> str:
    return ", ".join(f'"{c.name}" {c.sql_type}' for c in table.columns) or "none"
