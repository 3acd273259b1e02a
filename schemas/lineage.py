"""The warehouse tables the pipeline writes besides the target: lineage and imputed cells."""

from __future__ import annotations

import re

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

__all__ = [
    "IMPUTED_CELLS_DDL",
    "IMPUTED_CELLS_TABLE",
    "LINEAGE_DDL",
    "LINEAGE_TABLE",
    "RECORD_COLUMNS",
    "RECORD_MIGRATIONS",
    "ImputedCellsSchema",
    "LineageSchema",
]

LINEAGE_TABLE = "tdm_lineage"
IMPUTED_CELLS_TABLE = "tdm_imputed_cells"

LINEAGE_DDL = f"""
CREATE TABLE IF NOT EXISTS {LINEAGE_TABLE} (
    run_id VARCHAR NOT NULL,
    flow_name VARCHAR NOT NULL,
    deployment_name VARCHAR,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL,
    source_table VARCHAR NOT NULL,
    source_rows BIGINT NOT NULL,
    source_hash VARCHAR NOT NULL,
    target_table VARCHAR NOT NULL,
    replaced_source BOOLEAN NOT NULL,
    key_column VARCHAR,
    "rows" BIGINT NOT NULL,
    columns_imputed JSON NOT NULL,
    cells_imputed JSON NOT NULL,
    imputer VARCHAR NOT NULL,
    hyperparameters JSON NOT NULL,
    seed BIGINT NOT NULL,
    device VARCHAR,
    n_iter BIGINT,
    final_loss DOUBLE,
    fit_seconds DOUBLE,
    quality_passed BOOLEAN NOT NULL,
    quality_report JSON NOT NULL,
    package_versions JSON NOT NULL,
    status VARCHAR NOT NULL,
    model_version BIGINT,
    rows_new BIGINT,
    rows_reused BIGINT,
    refit_reason VARCHAR,
    drift JSON,
    target_marker VARCHAR,
    recipe_hash VARCHAR,
    target_hash VARCHAR
)
"""

IMPUTED_CELLS_DDL = f"""
CREATE TABLE IF NOT EXISTS {IMPUTED_CELLS_TABLE} (
    run_id VARCHAR NOT NULL,
    target_table VARCHAR NOT NULL,
    row_number BIGINT NOT NULL,
    row_key VARCHAR,
    column_name VARCHAR NOT NULL,
    model_version BIGINT,
    low DOUBLE,
    high DOUBLE,
    probability DOUBLE
)
"""

#: Columns added since the tables were first written: files written before gain them (NULL in
#: the rows already there) the first time a run writes to them.
_ADDED_COLUMNS = (
    (LINEAGE_TABLE, "model_version BIGINT"),
    (LINEAGE_TABLE, "rows_new BIGINT"),
    (LINEAGE_TABLE, "rows_reused BIGINT"),
    (LINEAGE_TABLE, "refit_reason VARCHAR"),
    (LINEAGE_TABLE, "drift JSON"),
    (LINEAGE_TABLE, "target_marker VARCHAR"),
    (LINEAGE_TABLE, "recipe_hash VARCHAR"),
    (LINEAGE_TABLE, "target_hash VARCHAR"),
    (IMPUTED_CELLS_TABLE, "model_version BIGINT"),
    (IMPUTED_CELLS_TABLE, "low DOUBLE"),
    (IMPUTED_CELLS_TABLE, "high DOUBLE"),
    (IMPUTED_CELLS_TABLE, "probability DOUBLE"),
)
RECORD_MIGRATIONS: tuple[str, ...] = tuple(
    f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}" for table, column in _ADDED_COLUMNS
)


def _first_columns(table: str, ddl: str) -> frozenset[str]:
    declared = re.findall(r'^ +"?(\w+)"? [A-Z]', ddl, re.MULTILINE)
    added = {column.split()[0] for name, column in _ADDED_COLUMNS if name == table}
    return frozenset(declared) - added


RECORD_COLUMNS = {
    LINEAGE_TABLE: _first_columns(LINEAGE_TABLE, LINEAGE_DDL),
    IMPUTED_CELLS_TABLE: _first_columns(IMPUTED_CELLS_TABLE, IMPUTED_CELLS_DDL),
}
"""The columns each record table has had since it was first written: a table by that name
without one of them is not the pipeline's."""


class LineageSchema(pa.DataFrameModel):
    """One row of `tdm_lineage`: what ran, on what, with which settings, and what came out.

    `status` is "imputed" (the target written whole), "copied" (no missing cell), "appended"
    (an incremental run: only the rows new since the last run imputed and added to the target)
    or "unchanged" (nothing written: the source, the settings and the target were as a run left
    them, `recipe_hash` and `target_hash` below; the row repeats that run's record, its
    `target_marker` names it, and its imputed cells stay listed under that run's id).
    Runs with a stored model (`tdm_models`) fill the last five fields: `model_version` (the
    model that imputed the run's cells), `rows_new` and `rows_reused` (rows imputed now, rows
    kept as an earlier run wrote them), `refit_reason` (why a model was fitted, NULL when the
    stored one was used) and `drift` (per column, the new rows' shift against the model's fit
    data, JSON); other runs leave them NULL. `target_marker` is the comment the run left on the
    target table it wrote (`tasks.targets.target_marker`; NULL for a source updated in place):
    a later run replaces a table only if it still carries the marker of a run that wrote it.
    A run that writes a whole target records `recipe_hash`, a hash of all that shapes it but
    the source's contents (the request, settings, seed and package versions), and
    `target_hash`, the target's fingerprint as written; other runs leave them NULL.
    """

    run_id: Series[str]
    flow_name: Series[str]
    deployment_name: Series[str] = pa.Field(nullable=True)
    started_at: Series[pd.DatetimeTZDtype("us", "UTC")]  # type: ignore[valid-type]
    finished_at: Series[pd.DatetimeTZDtype("us", "UTC")]  # type: ignore[valid-type]
    source_table: Series[str]
    source_rows: Series[int] = pa.Field(ge=0)
    source_hash: Series[str] = pa.Field(str_length={"min_value": 1})
    target_table: Series[str]
    replaced_source: Series[bool]
    key_column: Series[str] = pa.Field(nullable=True)
    rows: Series[int] = pa.Field(ge=0)
    columns_imputed: Series[str]
    cells_imputed: Series[str]
    imputer: Series[str]
    hyperparameters: Series[str]
    seed: Series[int]
    device: Series[str] = pa.Field(nullable=True)
    n_iter: Series[float] = pa.Field(nullable=True, ge=0)
    final_loss: Series[float] = pa.Field(nullable=True)
    fit_seconds: Series[float] = pa.Field(nullable=True, ge=0)
    quality_passed: Series[bool]
    quality_report: Series[str]
    package_versions: Series[str]
    status: Series[str] = pa.Field(isin=["imputed", "copied", "appended", "unchanged"])
    model_version: Series[float] = pa.Field(nullable=True, ge=1)
    rows_new: Series[float] = pa.Field(nullable=True, ge=0)
    rows_reused: Series[float] = pa.Field(nullable=True, ge=0)
    refit_reason: Series[str] = pa.Field(nullable=True)
    drift: Series[str] = pa.Field(nullable=True)
    target_marker: Series[str] = pa.Field(nullable=True)
    recipe_hash: Series[str] = pa.Field(nullable=True)
    target_hash: Series[str] = pa.Field(nullable=True)

    class Config:
        strict = True
        ordered = True
        coerce = True


class ImputedCellsSchema(pa.DataFrameModel):
    """Rows of `tdm_imputed_cells`: one per cell the run filled in. `row_number` is the row's
    0-based position in the target when written (storage order; for a whole table, its position
    in the source too); `row_key` (the key's value as DuckDB's text, `key::VARCHAR`, when the
    run had a key) is what still finds the row after rows move; `model_version`, the stored
    model that imputed it (NULL for a run without a model store). A run with draws (`--draws
    K`) fills, for a numeric cell, `low` and `high`, the 5% and 95% quantiles of its K draws in
    the column's units (rounded as its imputed cells are), and for a label cell `probability`,
    the share of the draws that gave it the label the target holds; other runs and cells leave
    them NULL."""

    run_id: Series[str]
    target_table: Series[str]
    row_number: Series[int] = pa.Field(ge=0)
    row_key: Series[str] = pa.Field(nullable=True)
    column_name: Series[str]
    model_version: Series[float] = pa.Field(nullable=True, ge=1)
    low: Series[float] = pa.Field(nullable=True)
    high: Series[float] = pa.Field(nullable=True)
    probability: Series[float] = pa.Field(nullable=True, ge=0, le=1)

    class Config:
        strict = True
        ordered = True
        coerce = True
