"""Pipeline settings: defaults for an embedded warehouse, overridable by `TDM_*` variables."""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

import duckdb
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.expectations import LABEL_SHARE_THRESHOLD, RANGE_FACTOR, SPREAD_THRESHOLD
from schemas.warehouse import check_draws
from tasks.draws import Fill
from tasks.errors import PipelineInputError, problem
from tasks.imputer_settings import ENV_PREFIX, setting_names
from tasks.warehouse.names import DEFAULT_TARGET_SUFFIX

__all__ = [
    "OTHER_VARIABLES",
    "SERVED_DB_VARIABLE",
    "PipelineSettings",
    "check_known_variables",
    "check_served_database",
    "environment_set",
]

OTHER_VARIABLES = {
    "TDM_WAREHOUSE_CONFIG": "tdm serve's and tdm warehouse's config",
    "TDM_SCHEDULE_CRON": "tdm serve's schedule",
    "TDM_SCHEDULE_TIMEZONE": "tdm serve's schedule",
    "TDM_ALLOW_CUDA": "dev.sh",
    "TDM_DATASETS_DIR": "the benchmark's datasets",
    "TDM_SERVED_DB": "the database files served runs may write (set by tdm serve, or a worker)",
}
"""The `TDM_*` variables read elsewhere than the run's and the imputer's settings."""
SERVED_DB_VARIABLE = "TDM_SERVED_DB"
"""Set by `tdm serve` for the runs it serves: the database files they may write (resolved,
joined by `os.pathsep`)."""


class PipelineSettings(BaseSettings):
    """The run's own settings; each field `name` reads the variable `TDM_<NAME>`.

    The imputer's settings (`TDM_MAX_ITER`, `TDM_BATCH_SIZE`, ...) are the library's, read by
    `tasks.imputer_settings`. Precedence: explicit values (CLI flags, flow parameters) >
    environment > these defaults.
    """

    model_config = SettingsConfigDict(env_prefix="TDM_", frozen=True, extra="ignore")

    @classmethod
    def from_env(cls, *, check_unknown: bool = True) -> PipelineSettings:
        """The settings the `TDM_*` variables give; an invalid one raises `PipelineInputError`
        naming the variable, its value and what it must be, and so does a variable that names no
        setting (`check_known_variables`), unless not `check_unknown`."""
        try:
            settings = cls()
        except ValidationError as error:
            problems = "; ".join(
                f"TDM_{str(e['loc'][0]).upper()}={e['input']!r}: {problem(e)}"
                for e in error.errors()
            )
            raise PipelineInputError(f"Invalid environment variable: {problems}.") from None
        if check_unknown:
            check_known_variables(os.environ)
        return settings

    db_path: Path = Field(
        default=Path("warehouse.duckdb"), description="The DuckDB warehouse file."
    )
    seed: int = Field(
        default=0, ge=0, lt=2**32, description="Random seed: same inputs and seed, same table."
    )
    range_factor: float = Field(
        default=RANGE_FACTOR,
        gt=0,
        description="Sane-range check: imputed values must lie within k observed ranges of the "
        "observed [min, max].",
    )
    label_share_threshold: float = Field(
        default=LABEL_SHARE_THRESHOLD,
        gt=0,
        le=1,
        description="Quality warning: a text, enum or boolean column whose imputed cells take "
        "its labels in shares this far (total variation distance) from the observed ones is "
        "named in the run's report and log (the run does not fail).",
    )
    spread_threshold: float = Field(
        default=SPREAD_THRESHOLD,
        gt=0,
        lt=1,
        description="Quality warning: a numeric column whose imputed cells' standard deviation "
        "is below (1 - t) or above 1 / (1 - t) times its observed cells' is named in the run's "
        "report and log (the run does not fail).",
    )
    fill: Fill = Field(
        default="point",
        description="What the target's missing cells receive: 'point', each cell's best guess, "
        "or 'draw', one draw from the imputer's distribution of the missing cells (a table "
        "whose imputed spread and label shares come near the data's).",
    )
    draws: int = Field(
        default=0,
        ge=0,
        description="Draws of each imputed cell made to measure its uncertainty: with "
        "2 <= K <= 1000, tdm_imputed_cells gets, per numeric cell, low and high (the 5% and "
        "95% quantiles of its K draws) and, per label cell, probability (the share of the "
        "draws that gave it the label written); 0: none. Draws take one to two more fits.",
    )
    torch_threads: int = Field(
        default=1,
        ge=0,
        description="CPU threads torch may use in a tdm command's process and in the runs "
        "`tdm serve` serves (0: torch's default, one per core; see docs/decisions.md, One "
        "torch thread).",
    )
    target_suffix: str = Field(
        default=DEFAULT_TARGET_SUFFIX,
        min_length=1,
        description="Default target table name = source name + this suffix.",
    )
    replace_target: bool = Field(
        default=False,
        description="Replace an existing target table the pipeline did not write (no tdm_lineage "
        "row names it); without it such a target is refused. Its own earlier targets are always "
        "replaced.",
    )

    nan_as_missing: bool = Field(
        default=False,
        description="Impute the NaN values of FLOAT and DOUBLE columns as missing cells; "
        "without it a column to impute that holds NaN (a value in DuckDB, not NULL) is refused.",
    )
    skip_unchanged: bool = Field(
        default=True,
        description="Leave a whole-table target as it is when an earlier run wrote it from the "
        "same source contents with the same settings, seed and package versions, and nobody "
        "changed it since: the run records that in tdm_lineage (status unchanged) instead of "
        "fitting again. False: every run fits and writes.",
    )

    task_runner: Literal["threads", "dask"] = Field(
        default="threads",
        description="Where impute-warehouse runs its imputations: a thread pool in the flow's "
        "process, or a Dask cluster (prefect-dask).",
    )
    max_workers: int = Field(default=2, ge=1, description="Imputations at once on the thread pool.")
    dask_address: str | None = Field(
        default=None,
        description="Scheduler address of an existing Dask cluster (unset: start a local one).",
    )
    dask_workers: int = Field(
        default=2, ge=1, description="Workers of the local Dask cluster (one thread each)."
    )
    dask_gpu: bool = Field(
        default=False,
        description="Annotate imputations to need one 'GPU' Dask worker resource (start GPU "
        "workers with --resources GPU=1).",
    )
    max_fit_rows: int = Field(
        default=200_000,
        ge=2,
        description="A table with more rows is fitted on a random sample of this many rows, "
        "then imputed partition by partition with the fitted model.",
    )
    partition_rows: int = Field(
        default=100_000, ge=1, description="Rows per partition of a partitioned table."
    )

    duckdb_memory_limit: str | None = Field(
        default="256MB",
        description="DuckDB's memory limit while a partitioned table is written (it spills the "
        "uncommitted target to disk beyond it); unset: DuckDB's default, 80% of the RAM.",
    )

    drift_threshold: float = Field(
        default=1.0,
        gt=0,
        description="Incremental runs: a numeric column drifts when its observed mean on the new "
        "rows is more than this many of the model's fit-data standard deviations away.",
    )
    drift_label_threshold: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Incremental runs: a text, enum or boolean column drifts when its label "
        "shares on the new rows are this far (total variation distance) from the fit data's, "
        "or show a label the model never saw.",
    )
    on_drift: Literal["refit", "warn"] = Field(
        default="refit",
        description="Incremental runs: what drift past a threshold does: refit the model, or "
        "warn and impute the new rows with the stored model.",
    )
    refit_every_days: float | None = Field(
        default=None,
        gt=0,
        description="Incremental runs: refit when the stored model is this many days old "
        "(unset: only when asked, on drift, or when the stored model cannot be used).",
    )
    rewrite_on_refit: bool = Field(
        default=False,
        description="Incremental runs: when a model is refitted, impute every row of the target "
        "again with it (the target is replaced); otherwise rows imputed before keep their values.",
    )
    model_dir: str | None = Field(
        default=None,
        min_length=1,
        description="Incremental runs: keep the fitted models' files in this folder (relative: "
        "from the DuckDB file's folder), one subfolder per target table, instead of in the "
        "tdm_models table, which keeps each version's path and digest (unset: in the table).",
    )

    _draws = field_validator("draws")(check_draws)

    @field_validator("duckdb_memory_limit")
    @classmethod
    def _memory_limit(cls, value: str | None) -> str | None:
        """A limit DuckDB reads (checked now, not when a table first needs partitions)."""
        if value:  # empty: unset, as the writer takes it
            with duckdb.connect() as con:
                try:
                    con.execute("SET memory_limit = ?", [value])  # as the writer sets it
                except duckdb.Error:
                    raise ValueError(
                        f"{value!r} is not a DuckDB memory limit (a number and a unit: 256MB, 4GB)"
                    ) from None
        return value

    notify_url: str | None = Field(
        default=None,
        description="Webhook that gets a JSON POST (flow run, tables, reason, UI link) when an "
        "impute-table or impute-warehouse run fails or crashes (unset: no notification).",
    )


def check_known_variables(environ: Mapping[str, str]) -> None:
    """Refuse `TDM_*` variables that name no setting (a typo, or a setting of an earlier
    release), each named with the closest known one: else they would be ignored, and the run
    would go on without what they were meant to set."""
    known = {
        f"{ENV_PREFIX}{name.upper()}" for name in (*PipelineSettings.model_fields, *setting_names())
    }
    known.update(OTHER_VARIABLES)
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known
    )  # pydantic-settings reads any letter case
    if not unknown:
        return
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.8)
        named.append(f"{name} (did you mean {close[0]}?)" if close else name)
    many = len(unknown) > 1
    raise PipelineInputError(
        f"Unknown environment variable{'s' * many} {', '.join(named)}: no setting of this "
        f"release reads {'them' if many else 'it'} (some settings of earlier releases are now "
        f"fixed by the library), so the run would go on without {'them' if many else 'it'}. "
        f"Unset {'them' if many else 'it'}, or use a setting's own name (`tdm impute --help`)."
    )


def check_served_database(db_path: str, subject: str) -> None:
    """In a run served by `tdm serve`, or by a worker given :data:`SERVED_DB_VARIABLE`, refuse
    a database file other than those it names: a run's parameters come from whoever can reach
    the server, and must not point the service at another file. Where it is unset, nothing."""
    served = [
        Path(p).resolve() for p in os.environ.get(SERVED_DB_VARIABLE, "").split(os.pathsep) if p
    ]
    if not served or Path(db_path).resolve() in served:
        return
    files = " and ".join(f"'{p}'" for p in served)
    raise PipelineInputError(
        f"{subject} asks for the database file '{db_path}', but this service writes {files} "
        f"only ({SERVED_DB_VARIABLE}), so nothing was written: serve that file with a "
        "`tdm serve` of its own, or run `tdm impute` / `tdm warehouse` on it."
    )


@contextlib.contextmanager
def environment_set(values: Mapping[str, str]) -> Iterator[None]:
    """Within it, `values` are set in this process's environment (a run started here, and the
    processes it starts, read them); as they were after it."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
