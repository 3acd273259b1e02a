"""Quality step: checks the imputed columns must pass before anything is written.

A check is built here (plain pandas) or as a Great Expectations expectation in
`schemas/expectations.py` (its name and threshold there); either way its outcome is a
`CheckOutcome`, a failure or a warning, which the lineage's quality report keeps. Its short name
in the run report is an entry of `tasks.artifacts.CHECK_KINDS` (a test holds every check to
one), and docs/operator.md lists what each check does."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import pandera.errors
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.expectations import (
    CHECK_COLUMN,
    CHECK_META,
    IMPUTED_SPREAD,
    LABEL_SHARE_THRESHOLD,
    RANGE_FACTOR,
    SPREAD_THRESHOLD,
    WITHIN_BOUNDS,
    expectation_suite,
)
from schemas.output import output_schema
from tasks.bounds import ColumnBounds
from tasks.drift import (
    average_distance,
    chance_distance,
    label_shares,
    largest_departure,
    share_distance,
)
from tasks.errors import QualityCheckError
from tasks.frames import as_float_frame, moments
from tasks.load import SourceTable
from tasks.validate import ImputationPlan
from tasks.warehouse.tables import INTEGER

__all__ = [
    "INTEGRAL",
    "LABEL_SHARES",
    "OBSERVED_SHARE",
    "CheckOutcome",
    "ObservedCells",
    "QualityReport",
    "SpreadRange",
    "check_quality",
    "merge_reports",
    "sane_bounds",
    "spread_range",
]

INTEGRAL = "integral_values"
"""The name of the check that an integer column holds whole numbers only."""
LABEL_SHARES = "label_shares"
"""The name of the check that the imputed cells of each text, enum or boolean column take its
labels in shares near the observed ones (a warning, not a failure)."""
OBSERVED_SHARE = "observed_share"
"""The name of the check that each imputed column is observed in enough of the table's rows
for its imputed cells to rest on (`SPARSE_SHARE`; a warning, not a failure)."""
SPARSE_SHARE = 0.1
"""A column observed in fewer than this share of its table's rows is imputed with a warning."""


@dataclass(frozen=True)
class CheckOutcome:
    """One named check, whether it passed, and what was seen; a `warning` check that does not
    pass is reported, but does not fail the run."""

    name: str
    passed: bool
    detail: str
    warning: bool = False


@dataclass(frozen=True)
class QualityReport:
    """Every check run on the imputed table; `passed` unless a check failed (a warning does not
    fail). `bounds` holds, per numeric imputed column, the [low, high] its sane-range check
    allowed; `value_bounds` the bounds its imputed values were held to (`tasks.bounds`),
    `labels` the number of labels observed in each boolean or categorical column."""

    checks: tuple[CheckOutcome, ...]
    range_factor: float
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    value_bounds: Mapping[str, ColumnBounds] = field(default_factory=dict)
    labels: Mapping[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether every check passed (a warning does not count)."""
        return not self.failures

    @property
    def failures(self) -> tuple[CheckOutcome, ...]:
        """The checks that failed (and so fail the run)."""
        return tuple(c for c in self.checks if not c.passed and not c.warning)

    @property
    def warnings(self) -> tuple[CheckOutcome, ...]:
        """The warning checks that did not pass."""
        return tuple(c for c in self.checks if not c.passed and c.warning)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary for the lineage row (the bounds as [low, high, where the low
        end comes from, where the high end comes from], an open end as null)."""
        return {
            "passed": self.passed,
            "range_factor": self.range_factor,
            "checks": [asdict(c) for c in self.checks],
            "bounds": {name: b.to_list() for name, b in self.value_bounds.items()},
            "labels": dict(self.labels),
        }


def sane_bounds(observed: pd.Series, range_factor: float) -> tuple[float, float]:
    """[min - k * range, max + k * range] of the observed values (k = `range_factor`)."""
    low, high = float(observed.min()), float(observed.max())
    spread = high - low if high > low else max(abs(high), 1.0)
    return low - range_factor * spread, high + range_factor * spread


@dataclass(frozen=True)
class ObservedCells:
    """The observed cells of a whole table, for the checks of one part of it (a partition, an
    incremental run's new rows): per numeric column its (min, max) and standard deviation
    (0 when constant), per labelled column its label shares (labels as text)."""

    ranges: Mapping[str, tuple[float, float]]
    stds: Mapping[str, float]
    shares: Mapping[str, Mapping[str, float]]
    rows: int
    """The whole table's rows ..."""
    observed: Mapping[str, int]
    """... and each imputed column's observed cells among them."""


@task(name="check-quality", cache_policy=NO_CACHE)
def check_quality(
    source: SourceTable,
    plan: ImputationPlan,
    imputed: pd.DataFrame,
    range_factor: float = RANGE_FACTOR,
    whole: ObservedCells | None = None,
    label_share_threshold: float = LABEL_SHARE_THRESHOLD,
    spread_threshold: float = SPREAD_THRESHOLD,
) -> QualityReport:
    """Run the GX suite, the output schema, the integer and observed-cells checks; raise if any
    fails. Warn (`label_shares`) when a labelled column's imputed cells take its labels in
    shares further than `label_share_threshold` from the observed ones, and (`imputed_spread`)
    when a numeric column's imputed cells are less or more spread than its observed ones
    (`spread_range`).

    The observed cells these checks measure against (ranges, spreads, label shares) are
    `whole`'s when `source` holds one part of a table, else `source`'s own.
    """
    columns = list(plan.columns)
    labelled = [name for name in columns if name in plan.labels]
    numeric = [name for name in columns if name not in plan.labels]
    original = as_float_frame(source.frame, numeric)
    output = imputed[columns].copy()
    if plan.key is not None:
        output[plan.key] = source.frame[plan.key].to_numpy()
    bounds = {
        name: sane_bounds(pd.Series(whole.ranges[name]) if whole else original[name], range_factor)
        for name in numeric
    }
    value_bounds = {name: (b.low, b.high) for name, b in plan.bounds.items() if name in numeric}
    stds = whole.stds if whole is not None else {}
    spreads = {
        name: spread
        for name in numeric
        if (spread := spread_range(original[name], spread_threshold, stds.get(name))) is not None
    }
    checks = [
        *_run_expectations(
            _with_imputed_cells(output, source.frame, columns),
            columns,
            plan,
            bounds,
            value_bounds,
            spreads,
        ),
        _run_output_schema(output, columns, plan, labelled),
        *_integral(imputed, [name for name in numeric if plan.kind(name) == INTEGER]),
        _observed_cells_identical(original, imputed[numeric]),
        *([_observed_labels_identical(source.frame, imputed, labelled)] if labelled else []),
        _observed_share(source.frame, columns, whole),
        *(
            [
                _label_shares(
                    source.frame,
                    imputed,
                    labelled,
                    label_share_threshold,
                    None if whole is None else whole.shares,
                )
            ]
            if labelled
            else []
        ),
    ]
    report = QualityReport(
        checks=tuple(checks),
        range_factor=range_factor,
        bounds=bounds,
        value_bounds={name: plan.bounds[name] for name in value_bounds},
        labels={name: len(plan.labels[name]) for name in labelled},
    )
    if not report.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in report.failures)
        raise QualityCheckError(
            f'The imputed table "{plan.target_table}" (from "{plan.source_table}") failed its '
            f"quality checks, so nothing was written: {failed}."
        )
    return report


@dataclass(frozen=True)
class SpreadRange:
    """The standard deviation of a numeric column's observed cells, and the range that of its
    imputed cells may take without a warning."""

    observed: float
    low: float
    high: float


def spread_range(
    given: pd.Series, threshold: float, observed_std: float | None = None
) -> SpreadRange | None:
    """The range the standard deviation of a numeric column's imputed cells may take without a
    warning: (1 - t) to 1 / (1 - t) times that of its observed cells (`observed_std`, by default
    that of `given`'s observed cells; `given` holds NaN where missing), widened to three standard
    errors of a standard deviation of as many cells (1 / sqrt(2 (n - 1)), relative) so that a few
    imputed cells do not warn for chance alone. None with fewer than three imputed or two
    observed cells, or a constant observed column."""
    n = int(given.isna().sum())
    observed = given.dropna()
    std = moments(observed)[1] if len(observed) > 1 else 0.0
    if observed_std is not None:
        std = observed_std
    if n < 3 or not std > 0:
        return None
    chance = 3 / math.sqrt(2 * (n - 1))
    low = std * max(0.0, min(1 - threshold, 1 - chance))
    return SpreadRange(std, low, std * max(1 / (1 - threshold), 1 + chance))


def _with_imputed_cells(
    output: pd.DataFrame, source: pd.DataFrame, columns: list[str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """`output` with, per column, a column holding only its imputed cells (the others null),
    for the checks that concern imputed values alone (bounds, labels); and their names."""
    extra: dict[str, str] = {}
    added: dict[str, pd.Series] = {}  # joined whole: one column at a time fragments a wide frame
    for name in columns:
        column = f"{name} (imputed cells)"
        while column in output or column in added:
            column += "'"
        extra[name] = column
        missing = source[name].isna().to_numpy()
        added[column] = output[name].where(missing)
    return pd.concat([output, pd.DataFrame(added, index=output.index)], axis=1), extra


def _run_expectations(
    with_imputed: tuple[pd.DataFrame, dict[str, str]],
    columns: list[str],
    plan: ImputationPlan,
    bounds: dict[str, tuple[float, float]],
    value_bounds: dict[str, tuple[float, float]],
    spreads: dict[str, SpreadRange],
) -> list[CheckOutcome]:
    output, imputed_cells = with_imputed
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
    labels = {name: plan.labels[name] for name in plan.labelled}
    suite = expectation_suite(
        columns,
        plan.key,
        plan.n_rows,
        bounds,
        value_bounds,
        labels,
        imputed_cells,
        {name: (spread.low, spread.high) for name, spread in spreads.items()},
    )
    outcomes = []
    for result in batch.validate(suite).results:
        expectation = result.expectation_config
        kind = expectation.type if expectation is not None else "expectation"
        meta = (expectation.meta or {}) if expectation is not None else {}
        kind = str(meta.get(CHECK_META, kind))
        column = expectation.kwargs.get("column") if expectation is not None else None
        column = meta.get(CHECK_COLUMN, column)
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
        warning = expectation is not None and expectation.severity == "warning"
        if kind == WITHIN_BOUNDS and column in plan.bounds and not result.success:
            detail += f", outside its bounds {plan.bounds[column].describe()}"
        if kind == IMPUTED_SPREAD and column in spreads:
            detail = _spread_detail(seen.get("observed_value"), spreads[column])
        outcomes.append(
            CheckOutcome(name=name, passed=bool(result.success), detail=detail, warning=warning)
        )
    return outcomes


def _spread_detail(imputed: Any, allowed: SpreadRange) -> str:
    """The imputed cells' standard deviation as a ratio to the observed cells', against the
    ratios allowed."""
    try:
        ratio = f"{float(imputed) / allowed.observed:.2f}"
    except (TypeError, ValueError):
        ratio = "n/a"
    return (
        f"imputed cells' std {ratio} times the observed cells' ({allowed.observed:.4g}); "
        f"allowed {allowed.low / allowed.observed:.2f} to {allowed.high / allowed.observed:.2f}"
    )


def _run_output_schema(
    output: pd.DataFrame, columns: list[str], plan: ImputationPlan, labelled: list[str]
) -> CheckOutcome:
    try:
        output_schema(columns, plan.key, plan.n_rows, labelled).validate(output, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        cases = errors.failure_cases
        summary = ", ".join(
            f"{column}: {check}"
            for (column, check), _ in cases.groupby(["column", "check"], dropna=False)
        )
        return CheckOutcome("output_schema", False, summary)
    return CheckOutcome("output_schema", True, "numbers float64 and finite, no nulls, key unique")


def _integral(imputed: pd.DataFrame, columns: list[str]) -> list[CheckOutcome]:
    """One check per integer column: every value is a whole number."""
    outcomes = []
    for name in columns:
        values = imputed[name].to_numpy(dtype=np.float64)
        off = values[np.isfinite(values) & (values != np.round(values))]
        detail = (
            f"{off.size} fractional value(s), e.g. {[float(v) for v in off[:3]]}"
            if off.size
            else f"{values.size} whole numbers"
        )
        outcomes.append(CheckOutcome(f'{INTEGRAL}["{name}"]', not off.size, detail))
    return outcomes


def _observed_labels_identical(
    source: pd.DataFrame, imputed: pd.DataFrame, columns: list[str]
) -> CheckOutcome:
    """Every observed cell of a boolean or categorical column keeps its label."""
    changed = {}
    total = 0
    for name in columns:
        given = source[name]
        observed = given.notna().to_numpy()
        before = given.to_numpy(dtype=object)[observed]
        after = imputed[name].to_numpy(dtype=object)[observed]
        total += int(observed.sum())
        differ = sum(str(a) != str(b) for a, b in zip(before, after, strict=True))
        if differ:
            changed[name] = differ
    if changed:
        listed = ", ".join(f'"{c}" ({n})' for c, n in changed.items())
        return CheckOutcome("observed_labels_identical", False, f"labels changed in {listed}")
    return CheckOutcome("observed_labels_identical", True, f"{total} cells")


def _observed_share(
    source: pd.DataFrame, columns: list[str], whole: ObservedCells | None
) -> CheckOutcome:
    """Per column with imputed cells in `source`, how many of the table's rows observe it
    (`whole`'s counts where given, else `source`'s): in fewer than `SPARSE_SHARE` of them, its
    imputed cells rest on too little to be trusted unread."""
    rows = whole.rows if whole is not None else len(source)
    sparse, least = [], (2.0, "")
    for name in columns:
        imputed = int(source[name].isna().sum())
        if not imputed:
            continue
        observed = whole.observed[name] if whole is not None else len(source) - imputed
        share = observed / rows if rows else 0.0
        if observed < SPARSE_SHARE * rows:
            sparse.append(
                f'"{name}" {observed} observed value{"s" * (observed != 1)} in {rows} rows '
                f"({share:.0%}) for {imputed} imputed cell{'s' * (imputed != 1)}"
            )
        least = min(least, (share, name))
    if sparse:
        detail = (
            f"imputed from few observed values (in fewer than {SPARSE_SHARE:.0%} of the rows): "
            + "; ".join(sparse)
        )
        return CheckOutcome(OBSERVED_SHARE, False, detail, warning=True)
    detail = f'least observed "{least[1]}" ({least[0]:.0%})' if least[1] else "no imputed cell"
    return CheckOutcome(OBSERVED_SHARE, True, detail, warning=True)


def _label_shares(
    source: pd.DataFrame,
    imputed: pd.DataFrame,
    columns: list[str],
    threshold: float,
    whole: Mapping[str, Mapping[str, float]] | None = None,
) -> CheckOutcome:
    """Per labelled column with imputed cells, the total variation distance between the label
    shares of its imputed cells and of its observed ones (`whole`'s shares where given, else
    `source`'s). A column departs when the distance is past `threshold` and past three times
    what as many cells drawn at random with the observed shares show on average (so that a few
    imputed cells do not warn for chance alone), or past all but 0.1% of such draws (with many
    labels, chance alone shows a large distance: 61 cells of 239 labels, 0.77 on average, and
    all on one label 1.00)."""
    departed, largest = [], (0.0, "", 0, 0.0)
    for name in columns:
        missing = source[name].isna().to_numpy()
        if not missing.any():
            continue
        observed = dict(whole[name]) if whole is not None else label_shares(source[name])
        filled = label_shares(imputed[name][missing])
        distance = share_distance(observed, filled)
        n = int(missing.sum())
        chance = min(3 * average_distance(observed, n), chance_distance(observed, n))
        if distance > threshold and distance > chance:
            label = largest_departure(observed, filled)
            departed.append(
                f'"{name}" {distance:.2f} ({n} cells; "{label}": {observed.get(label, 0.0):.0%} '
                f"of the observed cells, {filled.get(label, 0.0):.0%} of the imputed ones)"
            )
        largest = max(largest, (distance, name, n, chance))
    if departed:
        detail = (
            f"imputed label shares depart from the observed ones by more than {threshold:g} in "
            f"total variation: {'; '.join(departed)}"
        )
        return CheckOutcome(LABEL_SHARES, False, detail, warning=True)
    distance, name, n, chance = largest
    detail = (
        f'largest distance {distance:.2f} ("{name}"), threshold {threshold:g}'
        if name
        else "no imputed label"
    )
    if distance > threshold:  # passed as within chance: say so, or it reads as a contradiction
        detail += (
            f"; within chance for {n} imputed cell{'s' * (n != 1)} (labels drawn at random "
            f"with the observed shares reach {chance:.2f})"
        )
    return CheckOutcome(LABEL_SHARES, True, detail, warning=True)


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
    every partition it ran on (a spread check needs imputed cells); its detail says on how many
    it ran and failed, and the first failure's detail, or the first partition's."""
    if not reports:
        raise ValueError("merge_reports needs at least one report")
    by_name: dict[str, list[CheckOutcome]] = {}
    for report in reports:  # by name: a check may run on some partitions only (a spread)
        for check in report.checks:
            by_name.setdefault(check.name, []).append(check)
    merged = []
    for same in by_name.values():
        first = same[0]
        failed = [c for c in same if not c.passed]
        scope = "" if len(same) == len(reports) else f" it ran on (of {len(reports)})"
        detail = (
            f"all {len(same)} partitions{scope}; the first: {first.detail}"
            if not failed
            else f"failed on {len(failed)} of {len(same)} partitions{scope}: {failed[0].detail}"
        )
        merged.append(replace(first, passed=not failed, detail=detail))
    # Every partition is checked against the whole table's observed range: the same bounds.
    return replace(reports[0], checks=tuple(merged))
