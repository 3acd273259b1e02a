"""The benchmark results tables: one row per finished trial, one row per MAE-trace checkpoint."""

from __future__ import annotations

from typing import ClassVar

import pandas as pd
import pandera.pandas as pa

__all__ = [
    "RESULTS_DDL",
    "RESULTS_TABLE",
    "TRACES_DDL",
    "TRACES_TABLE",
    "TRIAL_KEY",
    "BenchmarkResultsSchema",
    "MaeTraceSchema",
]

RESULTS_TABLE = "bench_results"
TRACES_TABLE = "bench_mae_traces"

#: Columns that identify a trial.
TRIAL_KEY: tuple[str, ...] = (
    "dataset",
    "mechanism",
    "seed",
    "method",
    "p",
    "params_hash",
    "tdm_version",
)
_KEY_SQL = ", ".join(f'"{name}"' for name in TRIAL_KEY)
# The columns naming the cell of the grid and the overrides' hash, first in both tables.
_CELL_DDL = ",\n    ".join(
    f'"{name}" {kind} NOT NULL'
    for name, kind in (
        ("dataset", "VARCHAR"),
        ("mechanism", "VARCHAR"),
        ("seed", "BIGINT"),
        ("method", "VARCHAR"),
        ("p", "DOUBLE"),
        ("params_hash", "VARCHAR"),
    )
)
_CELL_DDL += ","

RESULTS_DDL = f"""
CREATE TABLE IF NOT EXISTS "{RESULTS_TABLE}" (
    {_CELL_DDL}
    "params" JSON NOT NULL,
    "missing_rate" DOUBLE NOT NULL,
    "mae" DOUBLE NOT NULL,
    "rmse" DOUBLE NOT NULL,
    "w2sq_half" DOUBLE,
    "accuracy" DOUBLE,
    "svm_repeats" BIGINT NOT NULL,
    "fit_seconds" DOUBLE NOT NULL,
    "n_iter" BIGINT,
    "loss_trace" JSON NOT NULL,
    "tdm_version" VARCHAR NOT NULL,
    "finished_at" TIMESTAMP NOT NULL,
    "cat_error" DOUBLE,
    PRIMARY KEY ({_KEY_SQL})
)
"""

TRACES_DDL = f"""
CREATE TABLE IF NOT EXISTS "{TRACES_TABLE}" (
    {_CELL_DDL}
    "tdm_version" VARCHAR NOT NULL,
    "iteration" BIGINT NOT NULL,
    "mae" DOUBLE NOT NULL,
    PRIMARY KEY ({_KEY_SQL}, "iteration")
)
"""

_MECHANISMS = ["mcar", "mar", "mnarl", "mnarq", "mnarq_published"]


class BenchmarkResultsSchema(pa.DataFrameModel):
    """A finished trial: errors on the masked cells, W2²/2, SVM accuracy, timing, loss trace;
    for a mixed-type table, MAE/RMSE in column standard deviations over the numeric cells and
    the categorical error rate (`cat_error`)."""

    dataset: str = pa.Field(str_length={"min_value": 1})
    mechanism: str = pa.Field(isin=_MECHANISMS)
    seed: int = pa.Field(ge=0)
    method: str = pa.Field(str_length={"min_value": 1})
    p: float = pa.Field(gt=0.0, lt=1.0)
    params_hash: str = pa.Field(str_matches=r"^[0-9a-f]{16}$")
    params: str = pa.Field(str_startswith="{")
    missing_rate: float = pa.Field(gt=0.0, lt=1.0)
    mae: float = pa.Field(ge=0.0)
    rmse: float = pa.Field(ge=0.0)
    w2sq_half: float = pa.Field(ge=0.0, nullable=True)  # NaN when too many rows for exact OT
    accuracy: float = pa.Field(ge=0.0, le=1.0, nullable=True)  # classification datasets only
    svm_repeats: int = pa.Field(ge=0)
    fit_seconds: float = pa.Field(ge=0.0)
    n_iter: float = pa.Field(ge=0, nullable=True)  # float: NULL makes pandas store it as float
    loss_trace: str = pa.Field(str_startswith="[")
    tdm_version: str
    finished_at: pa.DateTime
    cat_error: float = pa.Field(ge=0.0, le=1.0, nullable=True)  # mixed-type tables only

    @pa.dataframe_check
    @classmethod
    def rmse_at_least_mae(cls, frame: pd.DataFrame) -> pd.Series:
        """RMSE >= MAE on the same cells (power-mean inequality); a violation means a bug."""
        return frame["rmse"] >= frame["mae"] - 1e-12

    class Config:
        """Coerce DuckDB's dtypes; one row per trial key."""

        coerce = True
        strict = True
        unique: ClassVar[list[str]] = list(TRIAL_KEY)


class MaeTraceSchema(pa.DataFrameModel):
    """MAE on the masked cells after `iteration` optimisation steps (a refit per checkpoint)."""

    dataset: str
    mechanism: str = pa.Field(isin=_MECHANISMS)
    seed: int = pa.Field(ge=0)
    method: str
    p: float = pa.Field(gt=0.0, lt=1.0)
    params_hash: str = pa.Field(str_matches=r"^[0-9a-f]{16}$")
    tdm_version: str
    iteration: int = pa.Field(ge=0)
    mae: float = pa.Field(ge=0.0)

    class Config:
        """Coerce DuckDB's dtypes; one row per checkpoint."""

        coerce = True
        strict = True
        unique: ClassVar[list[str]] = [*TRIAL_KEY, "iteration"]
