"""The config of the `impute-warehouse` flow: which tables a scheduled run imputes, and how.

A YAML file (example: `deployments/warehouse.yaml`)::

    db_path: warehouse.duckdb            # optional; else TDM_DB_PATH, else warehouse.duckdb
    tables:
      - table: sensors                   # required
        key: id                          # optional
        columns: [temperature, humidity] # optional; default every numeric column but the key
        target: sensors_imputed          # optional; default table + TDM_TARGET_SUFFIX
        imputer: {max_iter: 2000}        # optional overrides of the imputer settings
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = ["TableEntry", "WarehouseConfig", "WarehouseConfigError", "load_warehouse_config"]


class WarehouseConfigError(ValueError):
    """The config file cannot be read or does not describe a valid run."""


class TableEntry(BaseModel):
    """One table of the run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str = Field(min_length=1)
    key: str | None = None
    columns: list[str] | None = None
    target: str | None = None
    imputer: dict[str, Any] = Field(default_factory=dict)


class WarehouseConfig(BaseModel):
    """The whole run: an optional database path and at least one table, each named once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db_path: str | None = None
    tables: list[TableEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> WarehouseConfig:
        names = [t.table for t in self.tables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tables listed more than once: {', '.join(twice)}")
        targets = [t.target for t in self.tables if t.target]
        clash = sorted({t for t in targets if targets.count(t) > 1 or t in names})
        if clash:
            raise ValueError(f"target tables that clash with another entry: {', '.join(clash)}")
        return self


def load_warehouse_config(path: str | Path) -> WarehouseConfig:
    """Read and validate the YAML config at `path`; errors name the file and the entry."""
    where = Path(path)
    try:
        raw = yaml.safe_load(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WarehouseConfigError(f"Warehouse config '{where}' does not exist.") from None
    except (OSError, yaml.YAMLError) as error:
        raise WarehouseConfigError(f"Warehouse config '{where}' cannot be read: {error}") from None
    try:
        return WarehouseConfig.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'top level'}: {e['msg']}"
            for e in error.errors()
        )
        raise WarehouseConfigError(f"Warehouse config '{where}' is invalid: {problems}.") from None
