"""The model store: `tdm_models`, one row per fitted model version of a table.

A version is written in the same transaction as the run that fitted it, so a stored model always
has its lineage row (`run_id`). `model` holds the imputer's save file (`tdm.TDMImputer.save`),
or, with a model folder (`TDM_MODEL_DIR`), `model_path` names the file (relative to the DuckDB
file's folder where it lies under it) and `model` is NULL; `model_sha256` is the file's digest,
checked before it is read; `scaling` the column moments the
pipeline standardised with, and `profile` the observed distribution of the fit data per column,
which incremental runs compare new rows against (`tasks.drift`).
"""

from __future__ import annotations

import re

__all__ = ["MODELS_COLUMNS", "MODELS_DDL", "MODELS_MIGRATIONS", "MODELS_TABLE"]

MODELS_TABLE = "tdm_models"

MODELS_DDL = f"""
CREATE TABLE IF NOT EXISTS {MODELS_TABLE} (
    source_table VARCHAR NOT NULL,
    target_table VARCHAR NOT NULL,
    version BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    run_id VARCHAR NOT NULL,
    tdm_version VARCHAR NOT NULL,
    format_version BIGINT NOT NULL,
    columns JSON NOT NULL,
    key_column VARCHAR,
    watermark_column VARCHAR,
    settings JSON NOT NULL,
    seed BIGINT NOT NULL,
    source_hash VARCHAR NOT NULL,
    fit_rows BIGINT NOT NULL,
    scaling JSON NOT NULL,
    profile JSON NOT NULL,
    model_sha256 VARCHAR NOT NULL,
    model BLOB,
    model_path VARCHAR,
    PRIMARY KEY (target_table, version),
    CHECK ((model IS NULL) <> (model_path IS NULL))
)
"""

#: Brings a `tdm_models` table of an earlier version to this one (idempotent).
MODELS_MIGRATIONS = (
    f"ALTER TABLE {MODELS_TABLE} ADD COLUMN IF NOT EXISTS model_path VARCHAR",
    f"ALTER TABLE {MODELS_TABLE} ALTER COLUMN model DROP NOT NULL",
)

MODELS_COLUMNS = frozenset(re.findall(r"^ +([a-z_0-9]+) [A-Z]", MODELS_DDL, re.MULTILINE)) - {
    "model_path"
}
"""The columns `tdm_models` has had since it was first written: a table by that name without
one of them is not the pipeline's store."""
