"""A table's constraints as DuckDB reports them (`duckdb_constraints()`, `duckdb_tables().sql`):
the definition a target table keeps, the rows that would break a constraint, and the simple
bounds its CHECK constraints put on its columns, e.g. `(x >= 0)`, `(x BETWEEN 0 AND 10)`,
`(0 < x)`.

A target is created with its source's statement under its own name (`target_definition`):
the same columns, types, collations, defaults, NOT NULL, generated columns, PRIMARY KEY, UNIQUE
and CHECK constraints. Its FOREIGN KEYs are left out: in DuckDB a table referenced by a foreign
key cannot be dropped or replaced while the referencing table exists, and a foreign key cannot
cross schemas, so a target declaring them would tie the source's parent tables to it; the
values of an imputed column are checked against them instead (`broken_rows`).

Bounds are read from CHECK constraints of the forms `col op number` or `number op col` (op one
of < <= > >= =), `col BETWEEN number AND number`, numbers possibly in a CAST, and conjunctions
(AND) of these. Anything else (OR, NOT, functions, two columns) is returned as not used, for the
caller to name in its log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from tasks.errors import PipelineError
from tasks.warehouse.names import quote_identifier

__all__ = [
    "CHECK",
    "FOREIGN_KEY",
    "UNIQUE_KINDS",
    "CheckBounds",
    "Constraint",
    "Limit",
    "broken_rows",
    "parse_checks",
    "target_definition",
]

CHECK = "CHECK"
FOREIGN_KEY = "FOREIGN KEY"
UNIQUE_KINDS = ("PRIMARY KEY", "UNIQUE")

_NUMBER = r"[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?"
_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_OP = r"<=|>=|==|=|<|>"
_CAST = re.compile(rf"CAST\(\s*({_NUMBER})\s+AS\s+[A-Za-z ]+(?:\(\s*\d+\s*(?:,\s*\d+\s*)?\))?\s*\)")
_COLUMN_FIRST = re.compile(rf"({_IDENT})\s*({_OP})\s*({_NUMBER})")
_NUMBER_FIRST = re.compile(rf"({_NUMBER})\s*({_OP})\s*({_IDENT})")
_BETWEEN = re.compile(rf"({_IDENT})\s+BETWEEN\s+({_NUMBER})\s+AND\s+({_NUMBER})", re.IGNORECASE)
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "==": "="}

Limit = tuple[Decimal, bool]
"""One end of an interval: the value, and whether it is strict (`x > value`)."""


@dataclass(frozen=True)
class Constraint:
    """A constraint of a table: its kind ("PRIMARY KEY", "UNIQUE", "CHECK", "FOREIGN KEY",
    "NOT NULL"), its text as DuckDB prints it (`UNIQUE(a, b)`), its columns, a CHECK's
    expression, and a FOREIGN KEY's referenced table (in the same schema) and columns."""

    kind: str
    text: str
    columns: tuple[str, ...]
    expression: str | None = None
    referenced: tuple[str, tuple[str, ...]] | None = None


def broken_rows(constraint: Constraint, rows: str, schema: str) -> str | None:
    """SQL counting what breaks `constraint` among `rows` (a FROM item holding the table's
    columns): values held by more than one row (PRIMARY KEY, UNIQUE), rows whose CHECK is false,
    rows whose FOREIGN KEY matches no row of its table (in `schema`); None for NOT NULL, which
    no imputed cell breaks (each is set)."""
    columns = [quote_identifier(c) for c in constraint.columns]
    present = " AND ".join(f"t.{c} IS NOT NULL" for c in columns)
    if constraint.kind in UNIQUE_KINDS:
        return (
            f"SELECT count(*) FROM (SELECT 1 FROM {rows} AS t WHERE {present} "
            f"GROUP BY {', '.join(f't.{c}' for c in columns)} HAVING count(*) > 1)"
        )
    if constraint.kind == CHECK and constraint.expression is not None:
        return f"SELECT count(*) FROM {rows} AS t WHERE NOT ({constraint.expression})"
    if constraint.kind == FOREIGN_KEY and constraint.referenced is not None:
        table, keys = constraint.referenced
        parent = f"{quote_identifier(schema)}.{quote_identifier(table)}"
        match = " AND ".join(
            f"p.{quote_identifier(key)} = t.{c}" for key, c in zip(keys, columns, strict=True)
        )
        return (
            f"SELECT count(*) FROM {rows} AS t WHERE {present} "
            f"AND NOT EXISTS (SELECT 1 FROM {parent} AS p WHERE {match})"
        )
    return None


def target_definition(create: str, target: str) -> str:
    """`CREATE OR REPLACE TABLE target(...)` (`target` quoted) with the columns and constraints
    of DuckDB's statement `create` of another table (`duckdb_tables().sql`), its FOREIGN KEYs
    left out (see the module's docstring)."""
    opening = next((i for i, _ in _outside_quotes(create) if create[i] == "("), -1)
    closing = create.rstrip().rstrip(";").rstrip()
    if not create.upper().startswith("CREATE TABLE ") or opening < 0 or closing[-1:] != ")":
        raise PipelineError(
            f"DuckDB's definition of the source of {target} is not a CREATE TABLE statement "
            f"as expected: {create[:200]!r}"
        )
    body = closing[opening + 1 : -1]
    parts, start = [], 0
    for i, depth in _outside_quotes(body):
        if body[i] == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    kept = [part for part in parts if not part.upper().startswith(FOREIGN_KEY)]
    return f"CREATE OR REPLACE TABLE {target}({', '.join(kept)})"


@dataclass(frozen=True)
class CheckBounds:
    """The bounds of one column implied by a table's simple CHECK constraints."""

    low: Limit | None = None
    high: Limit | None = None


def parse_checks(checks: Sequence[str]) -> tuple[dict[str, CheckBounds], list[str]]:
    """Per column name (as the constraint writes it), the bounds the CHECK expressions imply;
    and the expressions, or parts of a conjunction, that are not simple bounds (not used)."""
    by_column: dict[str, CheckBounds] = {}
    ignored: list[str] = []
    for check in checks:
        for part in _conjuncts(_CAST.sub(r"\1", check)):
            found = _comparison(part)
            if found is None:
                ignored.append(part)
                continue
            for column, op, value in found:
                _add(by_column, column, op, value)
    return by_column, ignored


def _add(by_column: dict[str, CheckBounds], column: str, op: str, value: Decimal) -> None:
    now = by_column.get(column, CheckBounds())
    low, high = now.low, now.high
    if op in (">", ">=", "=", "=="):
        low = _tighter(low, (value, op == ">"), lower=True)
    if op in ("<", "<=", "=", "=="):
        high = _tighter(high, (value, op == "<"), lower=False)
    by_column[column] = CheckBounds(low, high)


def _tighter(old: Limit | None, new: Limit, *, lower: bool) -> Limit:
    if old is None or (new[0] > old[0] if lower else new[0] < old[0]):
        return new
    if new[0] == old[0]:
        return (old[0], old[1] or new[1])
    return old


def _comparison(part: str) -> list[tuple[str, str, Decimal]] | None:
    """(column, op, number) of a simple comparison, with the column on the left; None if the
    part is not one."""
    text = part.strip()
    between = _BETWEEN.fullmatch(text)
    if between:
        column = _unquote(between[1])
        low, high = _number(between[2]), _number(between[3])
        if low is None or high is None:
            return None
        return [(column, ">=", low), (column, "<=", high)]
    match = _COLUMN_FIRST.fullmatch(text)
    if match:
        value = _number(match[3])
        return None if value is None else [(_unquote(match[1]), match[2], value)]
    match = _NUMBER_FIRST.fullmatch(text)
    if match:
        value = _number(match[1])
        return None if value is None else [(_unquote(match[3]), _FLIPPED[match[2]], value)]
    return None


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(text.replace("_", ""))
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name


def _conjuncts(expression: str) -> list[str]:
    """The parts of `expression` joined by a top-level AND (a BETWEEN's AND excluded), each
    without its enclosing parentheses."""
    text = _strip_parens(expression)
    parts, start, between = [], 0, False
    for i, depth in _outside_quotes(text):
        if depth:
            continue
        if _word_at(text, i, "BETWEEN"):
            between = True
        elif _word_at(text, i, "AND"):
            if between:
                between = False
            else:
                parts.append(text[start:i])
                start = i + 3
    parts.append(text[start:])
    if len(parts) == 1:
        return [text]
    return [piece for part in parts for piece in _conjuncts(part)]


def _outside_quotes(text: str) -> Iterator[tuple[int, int]]:
    """Each index of `text` outside quoted names and strings, with the depth of parentheses
    there (an opening one counted at itself, a closing one no more)."""
    depth, i = 0, 0
    while i < len(text):
        if text[i] in "\"'":
            i = _after_quoted(text, i)
            continue
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        yield i, depth
        i += 1


def _word_at(text: str, i: int, word: str) -> bool:
    before = text[i - 1] if i else " "
    after = text[i + len(word)] if i + len(word) < len(text) else " "
    return (
        text[i : i + len(word)].upper() == word
        and not (before.isalnum() or before in "_$")
        and not (after.isalnum() or after in "_$")
    )


def _strip_parens(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and _closing(text) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def _closing(text: str) -> int:
    """The index of the parenthesis that closes the one at index 0 (-1 if none)."""
    for i, depth in _outside_quotes(text):
        if text[i] == ")" and depth == 0:
            return i
    return -1


def _after_quoted(text: str, i: int) -> int:
    """The index after the quoted name or string that starts at `i` (doubled quotes inside)."""
    quote = text[i]
    end = text.find(quote, i + 1)
    while end != -1 and text[end + 1 : end + 2] == quote:
        end = text.find(quote, end + 2)
    return len(text) if end == -1 else end + 1
