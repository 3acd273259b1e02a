"""Bounds of imputed numbers: the observed range, the config, the table's CHECK constraints and
the column's type, combined into one [low, high] per numeric column.

Precedence, per column: the config's bounds (`bounds: {col: [low, high]}`, null = open) replace
the observed [min, max]; the CHECK constraints DuckDB reports and the column type's range are
then always intersected with them, so that no imputed value can break a constraint or fail to
fit its type. Each end is finally moved inwards to a value the column's type holds: the next
integer for integer types (ceil of the low, floor of the high end), the next multiple of the
scale for DECIMAL, the number in single or double precision for FLOAT and DOUBLE (as DuckDB
compares them); a strict inequality (`x > 0`) moves one step further, so that the bound itself
satisfies it.

The CHECK constraints are read by `tasks.warehouse.constraints` (simple forms only); the others are
not used for bounds (`TableBounds.ignored_checks`, named in the run's log), and an imputed value
that breaks one is refused when written (the target keeps the source's CHECK constraints).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

import numpy as np

from tasks.errors import PipelineInputError, setting
from tasks.warehouse.constraints import CheckBounds, parse_checks
from tasks.warehouse.tables import (
    DECIMAL_TYPE,
    INTEGER,
    ColumnInfo,
    TableInfo,
    column_kind,
    type_range,
)

__all__ = [
    "CONFIG",
    "OBSERVED",
    "ColumnBounds",
    "TableBounds",
    "column_bounds",
    "table_bounds",
]

OBSERVED = "observed"
CONFIG = "config"
CHECK = "CHECK"
TYPE = "type"
OPEN = "open"

_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ColumnBounds:
    """The range imputed values of a numeric column must lie in (in the column's units; -inf or
    inf where open), and where each end comes from: observed, config, CHECK, type or open."""

    low: float
    high: float
    low_from: str = OBSERVED
    high_from: str = OBSERVED

    def describe(self) -> str:
        """`[low, high]` with where each end comes from, for reports and logs."""
        same = self.low_from == self.high_from
        origin = self.low_from if same else f"{self.low_from}/{self.high_from}"
        return f"[{_shown(self.low)}, {_shown(self.high)}] ({origin})"

    def for_imputer(self) -> tuple[float, float]:
        """The ends the imputer holds values to: an end that is only the type's limit is left
        open (infinite). Such a limit is far from the data, where a bounded transform fits
        badly; a value beyond it fails the within-bounds check instead."""
        return (
            -math.inf if self.low_from == TYPE else self.low,
            math.inf if self.high_from == TYPE else self.high,
        )

    def to_list(self) -> list[object]:
        """[low, high, low_from, high_from], JSON-ready (an open end as None)."""
        return [_json(self.low), _json(self.high), self.low_from, self.high_from]


def _shown(value: float) -> str:
    if not math.isfinite(value):
        return "-inf" if value < 0 else "inf"
    if value.is_integer() and abs(value) < 2**64:  # whole numbers in full, up to UBIGINT's
        return str(int(value))
    return f"{value:.6g}"


def _json(value: float) -> float | None:
    return value if math.isfinite(value) else None


def column_bounds(
    table: str,
    column: ColumnInfo,
    observed: tuple[float, float],
    check: CheckBounds | None = None,
    config: Sequence[float | None] | None = None,
) -> ColumnBounds:
    """The bounds of `column` (see the module's docstring for the precedence); raise a
    `PipelineInputError` naming the table and column when they leave no value."""
    type_low, type_high = _type_range(column.sql_type)
    if config is not None:
        base_low = (Decimal(repr(config[0])), False, CONFIG) if config[0] is not None else None
        base_high = (Decimal(repr(config[1])), False, CONFIG) if config[1] is not None else None
    else:  # read as doubles, observed values may round past the type's range: kept inside
        ends = [_observed(value, column.sql_type) for value in observed]
        if type_low is not None and type_high is not None:
            ends = [min(max(end, type_low[0]), type_high[0]) for end in ends]
        base_low, base_high = ((end, False, OBSERVED) for end in ends)
    lows = [base_low, type_low, (*check.low, CHECK) if check and check.low else None]
    highs = [base_high, type_high, (*check.high, CHECK) if check and check.high else None]
    low = _binding([x for x in lows if x is not None], lower=True)
    high = _binding([x for x in highs if x is not None], lower=False)
    low_exact = _inwards(low, column.sql_type, up=True) if low else None
    high_exact = _inwards(high, column.sql_type, up=False) if high else None
    bounds = ColumnBounds(
        *_as_floats(low_exact, high_exact, column.sql_type),
        low[2] if low else OPEN,
        high[2] if high else OPEN,
    )
    if low_exact is not None and high_exact is not None and low_exact > high_exact:
        raise PipelineInputError(
            f'Column "{column.name}" ({column.sql_type}) of table "{table}" has no value its '
            f"imputed cells could take: its bounds {bounds.describe()} are empty once "
            "intersected with its CHECK constraints and its type (precedence: config, else the "
            "observed range; CHECK and type always apply). Widen the bounds given for it "
            f"({setting('bounds')}), or leave it out of the columns ({setting('columns')})."
        )
    return bounds


def _as_floats(low: Decimal | None, high: Decimal | None, sql_type: str) -> tuple[float, float]:
    """The ends as doubles (an open end infinite). An integer beyond 2**53 that no double holds
    becomes the next double inwards where that leaves the interval non-empty, else the nearest
    (the write rounds it into the type)."""
    low_value = float(low) if low is not None else -math.inf
    high_value = float(high) if high is not None else math.inf
    if _step(sql_type.upper()) != 1:
        return low_value, high_value
    inner_low, inner_high = low_value, high_value
    if low is not None and Decimal(low_value) < low:
        inner_low = math.nextafter(low_value, math.inf)
    if high is not None and Decimal(high_value) > high:
        inner_high = math.nextafter(high_value, -math.inf)
    return (inner_low, inner_high) if inner_low <= inner_high else (low_value, high_value)


def _observed(value: float, sql_type: str) -> Decimal:
    """An observed value, read as a double, as the number the column holds: a DECIMAL's as the
    shortest decimal that reads back as the double (3.45, not 3.4500000000000002), any other
    type's as the double's exact value (a BIGINT above 2**53 is a whole double)."""
    if DECIMAL_TYPE.fullmatch(sql_type.upper()):
        return Decimal(repr(float(value)))
    return Decimal(float(value))


def _binding(
    limits: list[tuple[Decimal, bool, str]], *, lower: bool
) -> tuple[Decimal, bool, str] | None:
    """The tightest limit; at a tie, strict beats non-strict and CHECK beats the others."""
    if not limits:
        return None
    best = max(limits, key=lambda x: x[0]) if lower else min(limits, key=lambda x: x[0])
    tied = [x for x in limits if x[0] == best[0]]
    strict = any(x[1] for x in tied)
    origin = next((x[2] for x in tied if x[2] == CHECK), best[2])
    return best[0], strict, origin


def _type_range(sql_type: str) -> tuple[tuple[Decimal, bool, str] | None, ...]:
    """The least and greatest value of the type (None where a double holds every value)."""
    found = type_range(sql_type)
    if found is None and sql_type.upper() == "FLOAT":
        found = (-Decimal(_FLOAT32_MAX), Decimal(_FLOAT32_MAX))
    if found is None:
        return None, None
    return (found[0], False, TYPE), (found[1], False, TYPE)


def _inwards(limit: tuple[Decimal, bool, str], sql_type: str, *, up: bool) -> Decimal:
    """The limit moved inwards (`up` for a low end) to the nearest value the type holds that
    satisfies it (strictly, for a strict limit): for integer and DECIMAL types the next
    multiple of their resolution; for FLOAT and DOUBLE the number in their precision."""
    value, strict, _ = limit
    kind = sql_type.upper()
    step = _step(kind)
    if step is not None:
        with localcontext() as exactly:
            exactly.prec = 100  # HUGEINT and DECIMAL(38, s) need 39 digits, and no rounding
            units = value / step
            whole = units.to_integral_value(rounding=ROUND_CEILING if up else ROUND_FLOOR)
            if strict and whole == units:
                whole += 1 if up else -1
            return whole * step
    # FLOAT and DOUBLE: DuckDB compares a column with a number in the column's precision, the
    # number rounded to the nearest value there; a strict bound moves one step further in.
    direction = math.inf if up else -math.inf
    if kind == "FLOAT":
        single = np.float32(float(value))
        if strict:
            single = np.nextafter(single, np.float32(direction))
        return Decimal(float(single))
    bound = float(value)
    return Decimal(math.nextafter(bound, direction) if strict else bound)


def _step(kind: str) -> Decimal | None:
    """The resolution of an integer or DECIMAL type (None for floating-point types)."""
    if column_kind(kind) == INTEGER:
        return Decimal(1)
    decimal = DECIMAL_TYPE.fullmatch(kind)
    return Decimal(10) ** -int(decimal[2]) if decimal is not None else None


@dataclass(frozen=True)
class TableBounds:
    """The bounds of a table's imputed numeric columns, and the CHECK expressions (or parts)
    that were not used because they are not simple bounds."""

    columns: dict[str, ColumnBounds]
    ignored_checks: tuple[str, ...] = ()


def table_bounds(
    table: TableInfo,
    columns: Sequence[str],
    observed: Mapping[str, tuple[float, float]],
    config: Mapping[str, Sequence[float | None]] | None = None,
    never_imputed: Mapping[str, str] | None = None,
) -> TableBounds:
    """The bounds of each numeric column among `columns` (stored names), from its `observed`
    (min, max), the `config` bounds (keyed by column name, any letter case) and `table`'s
    CHECK constraints; a config naming a column that does not exist, is not numeric or is
    among `never_imputed` (stored name -> what it is: "the key") is refused, naming it."""
    given = _config_bounds(table, config or {}, never_imputed or {})
    parsed, ignored = parse_checks(table.checks)
    checks: dict[str, CheckBounds] = {}
    for name, found in parsed.items():
        column = table.column(name)
        if column is not None:
            checks[column.name] = found
    result = {}
    for name in columns:
        column = table.column(name)
        if column is None or not column.is_numeric:
            continue
        result[column.name] = column_bounds(
            table.qualified, column, observed[name], checks.get(column.name), given.get(column.name)
        )
    return TableBounds(columns=result, ignored_checks=tuple(ignored))


def _config_bounds(
    table: TableInfo, config: Mapping[str, Sequence[float | None]], never: Mapping[str, str]
) -> dict[str, tuple[float | None, float | None]]:
    """The config's bounds by stored column name, each checked: [low, high], numbers or null."""
    result = {}
    for name, pair in config.items():
        column = table.column(name)
        where = f'The bounds given for column "{name}" of table "{table.qualified}"'
        if column is None:
            known = ", ".join(f'"{c.name}"' for c in table.columns)
            raise PipelineInputError(
                f"{where} ({setting('bounds')}) name no column of it (its columns: {known})."
            )
        if column.name in never:
            raise PipelineInputError(
                f"{where} cannot apply: it is {never[column.name]}, which is never imputed."
            )
        if not column.is_numeric:
            raise PipelineInputError(
                f"{where} cannot apply: it is {column.sql_type}, and bounds apply to numeric "
                "columns only (a text, enum or boolean column takes labels observed in it)."
            )
        values = list(pair) if isinstance(pair, (list, tuple)) else []
        ends = [float(v) if v is not None else None for v in values if _is_bound(v)]
        if (
            len(values) != 2
            or len(ends) != 2
            or (ends[0] is not None and ends[1] is not None and ends[0] > ends[1])
        ):
            raise PipelineInputError(
                f"{where} are {pair!r}: expected [low, high], two numbers with low <= high, "
                "either of them null for an open end."
            )
        result[column.name] = (ends[0], ends[1])
    return result


def _is_bound(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(float(value))
