"""Quality step: checks the imputed columns must pass before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pandera.errors
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.expectations import RANGE_FACTOR, expectation_suite
from schemas.output import output_schema
from tasks.errors import QualityCheckError
from tasks.frames import as_float_frame
from tasks.load import SourceTable
from tasks.validate import ImputationPlan

__all__ = ["CheckOutcome", "QualityReport", "check_quality", "merge_reports", "sane_bounds"]


@dataclass(frozen=True)
class CheckOutcome:
    """One named check, whether it passed, and what was seen."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class QualityReport:
    """Every check run on the imputed table; `passed` only if all of them passed. `bounds`
    holds, per imputed column, the [low, high] its sane-range check allowed."""

    checks: tuple[CheckOutcome, ...]
    range_factor: float
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary for the lineage row."""
        return {
            "passed": self.passed,
            "range_factor": self.range_factor,
            "checks": [asdict(c) for c in self.checks],
        }


def sane_bounds(observed: pd.Series, range_factor: float) -> tuple[float, float]:
    """[min - k * range, max + k * range] of the observed values (k = `range_factor`)."""
    low, high = float(observed.min()), float(observed.max())
    spread = high - low if high > low else max(abs(high), 1.0)
    return low - range_factor * spread, high + range_factor * spread


@task(name="check-quality", cache_policy=NO_CACHE)
def check_quality(
    source: SourceTable,
    plan: ImputationPlan,
    imputed: pd.DataFrame,
    range_factor: float = RANGE_FACTOR,
    observed_range: Mapping[str, tuple[float, float]] | None = None,
) -> QualityReport:
    """Run the GX suite, the output schema and the observed-cells check; raise if any fails.

    `observed_range` gives each column's observed (min, max) over the whole table when `source`
    holds one partition of it; by default they are taken from `source`.
    """
    columns = list(plan.columns)
    original = as_float_frame(source.frame, columns)
    output = imputed[columns].copy()
    if plan.key is not None:
        output[plan.key] = source.frame[plan.key].to_numpy()
    bounds = {
        name: sane_bounds(
            pd.Series(observed_range[name]) if observed_range else original[name], range_factor
        )
        for name in columns
    }

    checks = [
        *_run_expectations(output, columns, plan, bounds),
        _run_output_schema(output, columns, plan),
        _observed_cells_identical(original, imputed[columns]),
    ]
    report = QualityReport(checks=tuple(checks), range_factor=range_factor, bounds=bounds)
    if not report.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.passed)
        raise QualityCheckError(
            f'The imputed table "{plan.target_table}" (from "{plan.source_table}") failed its '
            f"quality checks, so nothing was written: {failed}."
        )
    return report


def _run_expectations(
    output: pd.DataFrame,
    columns: list[str],
    plan: ImputationPlan,
    bounds: dict[str, tuple[float, float]],
) -> list[CheckOutcome]:
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    context = gx.get_context(project_config=config, mode="ephemeral")
    batch = (
        context.data_sources.add_pandas("tdm")
        .add_dataframe_asset("imputed")
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": output})
    )
    suite = expectation_suite(columns, plan.key, plan.n_rows, bounds)
    outcomes = []
    for result in batch.validate(suite).results:
        expectation = result.expectation_config
        kind = expectation.type if expectation is not None else "expectation"
        column = expectation.kwargs.get("column") if expectation is not None else None
        name = kind + (f'["{column}"]' if column is not None else "")
        seen = result.result or {}
        if "unexpected_count" in seen:
            detail = f"{seen['unexpected_count']} unexpected value(s)"
            examples = seen.get("partial_unexpected_list") or []
            if examples:
                detail += f", e.g. {examples[:3]}"
        else:
            detail = f"observed {seen.get('observed_value')!r}"
        if result.exception_info and result.exception_info.get("raised_exception"):
            detail = f"could not be evaluated: {result.exception_info.get('exception_message')}"
        outcomes.append(CheckOutcome(name=name, passed=bool(result.success), detail=detail))
    return outcomes


def _run_output_schema(
    output: pd.DataFrame, columns: list[str], plan: ImputationPlan
) -> CheckOutcome:
    try:
        output_schema(columns, plan.key, plan.n_rows).validate(output, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        cases = errors.failure_cases
        summary = ", ".join(
            f"{column}: {check}"
            for (column, check), _ in cases.groupby(["column", "check"], dropna=False)
        )
        return CheckOutcome("output_schema", False, summary)
    return CheckOutcome("output_schema", True, "float64, finite, no nulls, key unique")


def _observed_cells_identical(original: pd.DataFrame, imputed: pd.DataFrame) -> CheckOutcome:
    source = original.to_numpy()
    result = imputed.to_numpy()
    observed = ~np.isnan(source)
    # Compare bit patterns, so that -0.0 against 0.0 would count as a change.
    differ = observed & (source.view(np.int64) != result.view(np.int64))
    if differ.any():
        columns = [original.columns[j] for j in np.unique(np.nonzero(differ)[1])]
        return CheckOutcome(
            "observed_cells_identical",
            False,
            f"{int(differ.sum())} observed cell(s) changed in "
            + ", ".join(f'"{c}"' for c in columns),
        )
    return CheckOutcome("observed_cells_identical", True, f"{int(observed.sum())} cells")


def merge_reports(reports: Sequence[QualityReport]) -> QualityReport:
    """One report for a table checked partition by partition: a check passes if it passed on
    every partition; its detail says on how many it failed, and the first failure's detail."""
    if not reports:
        raise ValueError("merge_reports needs at least one report")
    merged = []
    for j, first in enumerate(reports[0].checks):
        same = [r.checks[j] for r in reports]
        failed = [c for c in same if not c.passed]
        detail = (
            f"all {len(same)} partitions: {first.detail}"
            if not failed
            else f"failed on {len(failed)} of {len(same)} partitions: {failed[0].detail}"
        )
        merged.append(CheckOutcome(name=first.name, passed=not failed, detail=detail))
    # Every partition is checked against the whole table's observed range: the same bounds.
    return QualityReport(
        checks=tuple(merged), range_factor=reports[0].range_factor, bounds=reports[0].bounds
    )
