"""The model store: `tdm_models`, one row per fitted model version of a table.

A version is written in the same transaction as the run that fitted it, so a stored model always
has its lineage row (`run_id`). `model` holds the imputer's save file (`tdm.TDMImputer.save`)
and `model_sha256` its digest, checked before it is read; `scaling` the column moments the
pipeline standardised with, and `profile` the observed distribution of the fit data per column,
which incremental runs compare new rows against (`tasks.drift`).
"""

from __future__ import annotations

__all__ = ["MODELS_DDL", "MODELS_TABLE"]

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
    model BLOB NOT NULL,
    PRIMARY KEY (target_table, version)
)
"""
