"""The config of the `impute-warehouse` flow: which tables a scheduled run imputes, and how.

A YAML file (example: `deployments/warehouse.yaml`)::

    db_path: warehouse.duckdb            # optional; --db / db_path and TDM_DB_PATH beat it
    tables:
      - table: sensors                   # required
        key: id                          # optional
        columns: [temperature, humidity] # optional; default every numeric column, and every
                                         # text, enum or boolean column with a NULL, but the key
        pass_through: [notes]            # optional; left as they are, NULLs included
        bounds: {humidity: [0, 100], temperature: [-40, null]}  # optional; null = open
        target: sensors_imputed          # optional; default table + TDM_TARGET_SUFFIX
        imputer: {max_iter: 2000}        # optional overrides of the imputer settings
        incremental: true                # optional: keep a model (tdm_models), impute only
                                         # rows the target lacks (needs key or watermark)
        watermark: loaded_at             # optional: new rows are above the target's highest
        nan_as_missing: true             # optional: impute NaN as missing (default
                                         # TDM_NAN_AS_MISSING; without it NaN is refused)
        fill: draw                       # optional: point (default TDM_FILL) or one draw
        draws: 20                        # optional: draws per cell for tdm_imputed_cells'
                                         # low, high and probability (default TDM_DRAWS)

`bounds` replace a numeric column's observed [min, max] as the range of its imputed values; the
table's CHECK constraints and the column's type still apply. Table names are `table` (schema
main) or `schema.table`, compared case-insensitively as DuckDB does. No target may name a listed
table, another entry's target (default targets included), or a table starting with `tdm_` (the
pipeline's own); the flow checks this before anything runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "MAX_DRAWS",
    "TableEntry",
    "WarehouseConfig",
    "WarehouseConfigError",
    "check_draws",
    "load_warehouse_config",
    "yaml_problem",
]


MAX_DRAWS = 1_000
"""Most draws a run makes: they are held in memory together (rows x columns x draws)."""


def check_draws(draws: int | None) -> int | None:
    """Refuse one draw per cell (0: none, else 2 to :data:`MAX_DRAWS`), wherever the setting
    is given."""
    if draws == 1:
        raise ValueError("draws is 0 (none) or at least 2: one draw gives no interval")
    if draws is not None and draws > MAX_DRAWS:
        raise ValueError(
            f"draws is at most {MAX_DRAWS:,}: they are held in memory together, and the 5% "
            "and 95% quantiles they give settle long before"
        )
    return draws


class WarehouseConfigError(ValueError):
    """The config file cannot be read or does not describe a valid run."""


class TableEntry(BaseModel):
    """One table of the run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str = Field(min_length=1)
    key: str | None = None
    columns: list[str] | None = None
    pass_through: list[str] | None = None
    bounds: dict[str, tuple[float | None, float | None]] | None = None
    target: str | None = None
    imputer: dict[str, Any] = Field(default_factory=dict)
    incremental: bool = False
    watermark: str | None = None
    nan_as_missing: bool | None = None
    fill: Literal["point", "draw"] | None = None
    draws: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _incremental_rows(self) -> TableEntry:
        if self.incremental and self.key is None and self.watermark is None:
            raise ValueError("incremental: true needs a key or a watermark to tell new rows")
        if self.watermark is not None and not self.incremental:
            raise ValueError("watermark is for incremental runs: add incremental: true")
        return self

    _draws = field_validator("draws")(check_draws)

    @field_validator("bounds")
    @classmethod
    def _ordered(
        cls, bounds: dict[str, tuple[float | None, float | None]] | None
    ) -> dict[str, tuple[float | None, float | None]] | None:
        for column, (low, high) in (bounds or {}).items():
            for end in (low, high):
                if end is not None and not math.isfinite(end):
                    raise ValueError(f"bounds of {column!r}: {end} is not a finite number")
            if low is not None and high is not None and low > high:
                raise ValueError(f"bounds of {column!r}: low {low} is above high {high}")
        return bounds


class WarehouseConfig(BaseModel):
    """The whole run: an optional database path and at least one table, each named once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db_path: str | None = None
    tables: list[TableEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> WarehouseConfig:
        keys = [_table_key(t.table) for t in self.tables]
        twice = sorted(
            {t.table for t, k in zip(self.tables, keys, strict=True) if keys.count(k) > 1}
        )
        if twice:
            raise ValueError(f"tables listed more than once: {', '.join(twice)}")
        clashes = self.target_clashes(None)
        if clashes:
            raise ValueError("; ".join(clashes))
        return self

    def only(self, tables: list[str]) -> WarehouseConfig:
        """This config with only the entries of `tables` (names as DuckDB compares them), in
        its own order; a name it does not list is refused, naming those it does."""
        keys = {_table_key(t.table) for t in self.tables}
        unknown = [name for name in tables if _table_key(name) not in keys]
        if unknown:
            listed = ", ".join(t.table for t in self.tables)
            raise ValueError(f"{', '.join(unknown)} not listed in the config (it lists {listed})")
        chosen = {_table_key(name) for name in tables}
        return self.model_copy(
            update={"tables": [t for t in self.tables if _table_key(t.table) in chosen]}
        )

    def targets(self, target_suffix: str | None) -> list[str | None]:
        """Each entry's target: the explicit one, else table + `target_suffix` (None: unknown)."""
        return [
            t.target or (t.table + target_suffix if target_suffix is not None else None)
            for t in self.tables
        ]

    def target_clashes(self, target_suffix: str | None) -> list[str]:
        """One sentence per target that names a listed table, another entry's target, or a
        `tdm_*` table; `target_suffix` None: explicit targets only (the default is a setting)."""
        sources = {_table_key(t.table): n for n, t in enumerate(self.tables, 1)}
        problems: list[str] = []
        seen: dict[tuple[str, str], int] = {}
        for number, (entry, target) in enumerate(
            zip(self.tables, self.targets(target_suffix), strict=True), 1
        ):
            if target is None:
                continue
            key = _table_key(target)
            here = f'entry {number} ("{entry.table}") writes to "{target}"'
            if key in sources:
                other = sources[key]
                whose = "its own source" if other == number else f"the source of entry {other}"
                problems.append(f'{here}, which is {whose} ("{self.tables[other - 1].table}")')
            if key in seen:
                problems.append(f"{here}, the target of entry {seen[key]} too")
            seen.setdefault(key, number)
            if key[1].startswith("tdm_"):
                problems.append(f"{here}, a name reserved for the pipeline's own tables (tdm_*)")
        return problems


def _table_key(name: str) -> tuple[str, str]:
    """(schema, table), lowercased: `t` is main's, `s.t` is split at its first dot (the rule of
    `tasks.warehouse.names`), so that names DuckDB takes for the same table compare equal."""
    schema, dot, table = name.partition(".")
    return (schema.lower(), table.lower()) if dot else ("main", name.lower())


def load_warehouse_config(path: str | Path) -> WarehouseConfig:
    """Read and validate the YAML config at `path`; errors name the file and the entry."""
    where = Path(path)
    try:
        raw = yaml.safe_load(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WarehouseConfigError(f"Warehouse config '{where}' does not exist.") from None
    except yaml.YAMLError as error:
        raise WarehouseConfigError(
            f"Warehouse config '{where}' is not valid YAML: {yaml_problem(error)}."
        ) from None
    except (OSError, ValueError) as error:  # ValueError: not UTF-8, or a bad tag (!!int abc)
        raise WarehouseConfigError(f"Warehouse config '{where}' cannot be read: {error}") from None
    try:
        return WarehouseConfig.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{_place(e['loc'], raw)}: {str(e['msg']).removeprefix('Value error, ')}"
            for e in error.errors()
        )
        raise WarehouseConfigError(f"Warehouse config '{where}' is invalid: {problems}.") from None


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML syntax error in one line, counted from 1 as an editor counts: `line 3, column 1:
    expected ',' or ']', but got '<stream end>' (while parsing a flow sequence that starts at
    line 2, column 9)`."""
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        return f"character {error.position + 1} of the file: {error.reason}"
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return " ".join(str(error).split())
    mark, begun = error.problem_mark, error.context_mark
    context = f" ({error.context}" if error.context else ""
    if context and begun is not None and (begun.line, begun.column) != (mark.line, mark.column):
        context += f" that starts at line {begun.line + 1}, column {begun.column + 1}"
    context += ")" if context else ""
    return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}{context}"


def _place(loc: tuple[int | str, ...], raw: Any) -> str:
    """Where in the file a problem lies, as its reader counts: `tables entry 2 (sales): key`."""
    if len(loc) < 2 or loc[0] != "tables" or not isinstance(loc[1], int):
        return ".".join(str(part) for part in loc) or "top level"
    tables = raw.get("tables") if isinstance(raw, dict) else None
    entry = tables[loc[1]] if isinstance(tables, list) and loc[1] < len(tables) else None
    name = entry.get("table") if isinstance(entry, dict) else None
    head = f"tables entry {loc[1] + 1}" + (f" ({name})" if isinstance(name, str) else "")
    rest = ".".join(str(part) for part in loc[2:])
    return f"{head}: {rest}" if rest else head
