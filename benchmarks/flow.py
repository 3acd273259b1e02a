"""The `benchmark` flow: the paper's grid (datasets x mechanisms x seeds x methods), resumable.

Each trial is recorded as it finishes and trials already recorded are skipped; the report is
written at the end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from benchmarks.report import MethodLayout, Report, write_report
from benchmarks.tasks import (
    MergeCount,
    TrialSpec,
    load_done_trials,
    merge_results,
    read_results,
    read_traces,
    record_result,
    record_trace,
    run_trace_task,
    run_trial_task,
)
from tasks.artifacts import figure_markdown

__all__ = [
    "DEFAULT_DB_PATH",
    "MIXED_DB_PATH",
    "MIXED_METHODS",
    "MIXED_SEEDS",
    "BenchmarkOutcome",
    "TrialsFailedError",
    "benchmark",
    "benchmark_merge",
    "benchmark_report",
    "build_report",
    "plan_grid",
]

DEFAULT_DB_PATH = "results/benchmark.duckdb"
DEFAULT_DATASETS = ("concrete_slump", "parkinsons", "seeds", "glass", "blood_transfusion")
DEFAULT_MECHANISMS = ("mcar", "mar")
DEFAULT_METHODS = ("mean", "ice", "missforest", "softimpute", "ot_ns", "tdm", "tdm_paper")
# The mixed-type grid (`tdm bench --mixed`): its own results file, so that its report does not
# replace the paper grid's; the datasets are `benchmarks.datasets.MIXED_DATASETS`.
MIXED_DB_PATH = "results/mixed/benchmark.duckdb"
MIXED_METHODS = ("mode", "missforest_mixed", "miceforest", "tdm")
MIXED_SEEDS = (0, 1, 2, 3, 4)


class TrialsFailedError(RuntimeError):
    """Some trials of a grid failed (each named with its reason); the others are recorded and
    the report written."""


@dataclass(frozen=True)
class BenchmarkOutcome:
    """What a run did: trials run, skipped and failed, and where the report is."""

    planned: int
    skipped: int
    ran: int
    failed: tuple[str, ...]
    tables_path: str
    figure_paths: tuple[str, ...]


def _trial_params(method: str, max_iter: int | None) -> dict[str, Any]:
    """The ``max_iter`` override, for the methods that have that hyperparameter."""
    if max_iter is None:
        return {}
    from benchmarks.registry import get_method  # torch is loaded on first use only

    return {"max_iter": max_iter} if get_method(method).has_max_iter else {}


def _spec(
    dataset: str, mechanism: str, seed: int, method: str, p: float, params: dict[str, Any]
) -> TrialSpec:
    """A trial asked for: keyed on its overrides' hash and the library version."""
    from benchmarks.trial import params_hash
    from tdm import __version__

    return TrialSpec(
        dataset, mechanism, int(seed), method, float(p), params, params_hash(params), __version__
    )


def plan_grid(
    datasets: Sequence[str],
    mechanisms: Sequence[str],
    seeds: Sequence[int],
    methods: Sequence[str],
    p: float,
    max_iter: int | None,
) -> list[TrialSpec]:
    """Every trial of the grid, dataset-major so that small datasets finish first."""
    specs = []
    for dataset in datasets:
        for mechanism in mechanisms:
            for seed in seeds:
                for method in methods:
                    params = _trial_params(method, max_iter)
                    specs.append(_spec(dataset, mechanism, seed, method, p, params))
    return specs


@task(name="build-report", cache_policy=NO_CACHE)
def build_report(db_path: str, report_dir: str) -> Report:
    """Read the results tables and write tables.md and the figures; publish them as artifacts."""
    results = read_results(db_path)
    from benchmarks.registry import FIXTURES, REGISTRY  # torch is loaded on first use only

    layout = MethodLayout(order=tuple(REGISTRY), fixtures=FIXTURES)
    report = write_report(results, read_traces(db_path), report_dir, layout)
    figures = "\n".join(f"- `{path}`" for path in report.figure_paths) or "- (none yet)"
    create_markdown_artifact(
        key="benchmark-report",
        markdown=report.markdown + f"\n## Figures (PNG files)\n\n{figures}\n",
        description="Benchmark tables (mean ± std over seeds) and the paths of the figures",
    )
    for path in report.figure_paths:  # shown in the UI, not only listed
        figure = Path(path)
        create_markdown_artifact(
            key=f"benchmark-figure-{figure.stem.replace('_', '-')}",
            markdown=figure_markdown(
                figure.read_bytes(), figure.stem.replace("_", " "), f"`{path}`"
            ),
            description=f"Benchmark figure {figure.name}",
        )
    return report


@flow(name="benchmark-report", log_prints=True)
def benchmark_report(db_path: str = DEFAULT_DB_PATH, report_dir: str | None = None) -> Report:
    """Rewrite the report from the results table without running any trial."""
    return build_report(db_path, report_dir or str(Path(db_path).parent))


@flow(name="benchmark-merge", log_prints=True)
def benchmark_merge(
    sources: list[str], db_path: str = DEFAULT_DB_PATH, report_dir: str | None = None
) -> tuple[list[MergeCount], Report]:
    """Add other runs' results files to `db_path` (runs nothing), then rewrite the report."""
    logger = get_run_logger()
    counts = []
    for source in sources:
        count = merge_results(db_path, source)
        logger.info(
            "%s: %d trials added, %d already here; %d trace points added",
            source,
            count.trials_added,
            count.trials_already_here,
            count.trace_points_added,
        )
        counts.append(count)
    return counts, build_report(db_path, report_dir or str(Path(db_path).parent))


@flow(name="benchmark", log_prints=True)
def benchmark(
    datasets: list[str] = list(DEFAULT_DATASETS),  # noqa: B006 - Prefect shows it as the default
    mechanisms: list[str] = list(DEFAULT_MECHANISMS),  # noqa: B006
    seeds: list[int] = [0, 1, 2],  # noqa: B006
    methods: list[str] = list(DEFAULT_METHODS),  # noqa: B006
    p: float = 0.3,
    max_iter: int | None = None,
    db_path: str = DEFAULT_DB_PATH,
    report_dir: str | None = None,
    svm_repeats: int = 3,
    workers: int = 1,
    data_dir: str | None = None,
    trace_dataset: str | None = None,
    trace_seeds: list[int] = [0],  # noqa: B006
    trace_checkpoints: list[int] | None = None,
) -> BenchmarkOutcome:
    """Run the missing trials of the grid, record each as it finishes, then write the report."""
    logger = get_run_logger()
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    specs = plan_grid(datasets, mechanisms, seeds, methods, p, max_iter)
    done = load_done_trials(db_path)
    todo = [spec for spec in specs if spec.key not in done]
    logger.info(
        "%d trials planned, %d already recorded, %d to run",
        len(specs),
        len(specs) - len(todo),
        len(todo),
    )
    failed: list[str] = []
    finished = 0

    def finish(spec: TrialSpec, state: Any) -> None:
        # Runs in the flow's thread only: the one writer of the results file.
        nonlocal finished
        finished += 1
        count = f"trial {finished} of {len(todo)}"
        if state.is_completed():
            result = state.result()
            record_result(db_path, spec, result, svm_repeats)
            logger.info(
                "%s: MAE %.4f, %.1f s (%s)", spec.label, result.mae, result.fit_seconds, count
            )
        else:
            failed.append(f"{spec.label}: {state.message}")
            logger.error("%s failed (%s): %s", spec.label, count, state.message)

    if workers == 1:
        for spec in todo:
            finish(spec, run_trial_task(spec, svm_repeats, data_dir, return_state=True))
    else:
        # At most `workers` trials in flight on the flow's thread-pool task runner; results are
        # recorded in submission order by this thread, so one thread writes the file.
        pending: deque[tuple[TrialSpec, Any]] = deque()
        for spec in todo:
            pending.append((spec, run_trial_task.submit(spec, svm_repeats, data_dir)))
            if len(pending) >= workers:
                done_spec, future = pending.popleft()
                finish(done_spec, _state_of(future))
        while pending:
            done_spec, future = pending.popleft()
            finish(done_spec, _state_of(future))

    if trace_dataset is not None:
        _run_traces(
            trace_dataset,
            trace_seeds,
            methods,
            p,
            max_iter,
            trace_checkpoints,
            db_path,
            data_dir,
        )

    report = build_report(db_path, report_dir or str(Path(db_path).parent))
    outcome = BenchmarkOutcome(
        planned=len(specs),
        skipped=len(specs) - len(todo),
        ran=len(todo) - len(failed),
        failed=tuple(failed),
        tables_path=str(report.tables_path),
        figure_paths=tuple(str(p) for p in report.figure_paths),
    )
    if failed:
        raise TrialsFailedError(
            f"{len(failed)} of {len(todo)} trials failed (the others are recorded; re-run to "
            "retry only the missing ones): " + "; ".join(failed)
        )
    return outcome


def _state_of(future: Any) -> Any:
    """Wait for a submitted task and return its final state (never raises)."""
    future.wait()
    return future.state


def _run_traces(
    dataset: str,
    seeds: Sequence[int],
    methods: Sequence[str],
    p: float,
    max_iter: int | None,
    checkpoints: Sequence[int] | None,
    db_path: str,
    data_dir: str | None,
) -> None:
    """MCAR MAE-over-iterations traces of the run's batch-OT methods, skipping recorded ones."""
    mechanism = "mcar"
    from benchmarks.registry import get_method
    from benchmarks.trial import log_spaced_checkpoints

    traced = [m for m in methods if get_method(m).batch_ot]
    recorded = read_traces(db_path)
    for method in traced:
        steps = list(checkpoints or log_spaced_checkpoints(max_iter or _default_max_iter(method)))
        for seed in seeds:
            spec = _spec(dataset, mechanism, seed, method, p, {})
            mine = recorded[
                (recorded["dataset"] == dataset)
                & (recorded["mechanism"] == mechanism)
                & (recorded["seed"] == seed)
                & (recorded["method"] == method)
                & (recorded["p"] == p)
                & (recorded["tdm_version"] == spec.tdm_version)
            ]
            if set(steps) <= set(int(k) for k in mine["iteration"]):
                continue
            record_trace(db_path, spec, run_trace_task(spec, steps, data_dir))


def _default_max_iter(method: str) -> int:
    from benchmarks.registry import get_method

    return int(get_method(method).build().get_params()["max_iter"])
