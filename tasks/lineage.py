"""The lineage record of a run: one row of `tdm_lineage`, built from what the steps returned."""

from __future__ import annotations

import hashlib
import json
import platform
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import pandas as pd

import tdm
from schemas.lineage import LineageSchema
from tasks.load import SourceTable
from tasks.quality import QualityReport
from tasks.results import CellDraws, ImputationOutcome
from tasks.validate import ImputationPlan
from tasks.warehouse.tables import Fingerprint, TableInfo

__all__ = [
    "LineageRecord",
    "ModelUse",
    "RunInfo",
    "current_run",
    "package_versions",
    "table_recipe",
]

_PACKAGES = (
    "tdm-impute",
    "torch",
    "numpy",
    "pandas",
    "scikit-learn",
    "pot",
    "lapjv",
    "duckdb",
    "prefect",
    "pandera",
    "great-expectations",
    "pydantic",
)


@dataclass(frozen=True)
class RunInfo:
    """Who ran: the Prefect flow run (or a fresh id outside Prefect) and when it started."""

    run_id: str
    flow_name: str
    deployment_name: str | None
    started_at: datetime


def current_run(started_at: datetime | None = None) -> RunInfo:
    """The current Prefect flow run's id, flow and deployment names."""
    from prefect.runtime import deployment, flow_run

    return RunInfo(
        run_id=str(flow_run.id or uuid.uuid4()),
        flow_name=str(flow_run.flow_name or "impute-table"),
        deployment_name=deployment.name,
        started_at=started_at or datetime.now(UTC),
    )


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the result; tdm-impute's is the
    library's own (`tdm.__version__`): an editable install's metadata keeps the version it was
    installed at."""
    versions = {"python": platform.python_version(), "tdm-impute": tdm.__version__}
    for name in _PACKAGES:
        if name in versions:
            continue
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass(frozen=True)
class ModelUse:
    """How a run with a model store used it: the version that imputed its cells, the rows it
    imputed and those it kept as earlier runs wrote them, why it fitted a model (None: the
    stored one imputed), each column's drift, and whether it appended to the target."""

    version: int
    rows_new: int
    rows_reused: int
    refit_reason: str | None
    drift: dict[str, Any] | None
    appended: bool
    imputer: str = "TDMImputer"


@dataclass(frozen=True)
class LineageRecord:
    """Everything a lineage row holds except the finish time, which the writer stamps; and
    what the draws of the imputed cells show, in the data's units, for `tdm_imputed_cells`
    (None: no draws made). `recipe`: the run's recipe hash (`flows.steps.run_recipe`; None:
    a run that is never skipped); the writer sets `target_hash` and `target_marker`."""

    run: RunInfo
    source: SourceTable
    plan: ImputationPlan
    outcome: ImputationOutcome | None
    quality: QualityReport
    seed: int
    hyperparameters: dict[str, Any]
    versions: dict[str, str] = field(default_factory=package_versions)
    model: ModelUse | None = None
    target_marker: str | None = None
    draws: CellDraws | None = None
    recipe: str | None = None
    target_hash: str | None = None

    @property
    def status(self) -> str:
        """'appended' (rows added to the target with a stored model), 'imputed', or 'copied'
        when the table had no missing cell."""
        if self.model is not None and self.model.appended:
            return "appended"
        return "imputed" if self.outcome is not None else "copied"

    def to_frame(self, finished_at: datetime) -> pd.DataFrame:
        """The lineage row as a one-row frame validated by `LineageSchema`."""
        outcome, model = self.outcome, self.model
        row = {
            "run_id": self.run.run_id,
            "flow_name": self.run.flow_name,
            "deployment_name": self.run.deployment_name,
            "started_at": pd.Timestamp(self.run.started_at),
            "finished_at": pd.Timestamp(finished_at),
            "source_table": self.plan.source_table,
            "source_rows": self.source.fingerprint.rows,
            "source_hash": self.source.fingerprint.content_hash,
            "target_table": self.plan.target_table,
            "replaced_source": self.plan.replace_source,
            "key_column": self.plan.key,
            "rows": self.plan.n_rows,
            "columns_imputed": _json(list(self.plan.columns)),
            "cells_imputed": _json(dict(self.plan.missing)),
            "imputer": outcome.imputer if outcome else (model.imputer if model else "none"),
            "hyperparameters": _json(outcome.hyperparameters if outcome else self.hyperparameters),
            "seed": self.seed,
            "device": outcome.device if outcome else None,
            "n_iter": outcome.n_iter if outcome else None,
            "final_loss": outcome.final_loss if outcome else None,
            "fit_seconds": outcome.fit_seconds if outcome else None,
            "quality_passed": self.quality.passed,
            "quality_report": _json(self.quality.to_dict()),
            "package_versions": _json(self.versions),
            "status": self.status,
            "model_version": model.version if model else None,
            "rows_new": model.rows_new if model else None,
            "rows_reused": model.rows_reused if model else None,
            "refit_reason": model.refit_reason if model else None,
            "drift": _json(model.drift) if model and model.drift is not None else None,
            "target_marker": self.target_marker,
            "recipe_hash": (
                table_recipe(self.recipe, self.source.table, self.source.fingerprint)
                if self.recipe
                else None
            ),
            "target_hash": self.target_hash,
        }
        frame = pd.DataFrame([row])
        for name in ("started_at", "finished_at"):
            frame[name] = frame[name].astype("datetime64[us, UTC]")
        return LineageSchema.validate(frame)


def table_recipe(recipe: str, source: TableInfo, fingerprint: Fingerprint) -> str:
    """The recipe hash a lineage row records: the run's `recipe` (`flows.steps.run_recipe`)
    with the source's definition (its CREATE statement: its constraints bound the imputed
    values and the target is made from it) and the order of its rows (`order_hash`: the
    rows a fit reads, in that order, shape it)."""
    text = f"{recipe}\x1f{source.definition}\x1f{fingerprint.order_hash}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)
