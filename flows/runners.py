"""The task runner `impute-warehouse` spreads imputations over, chosen by settings.

Threads in the flow's process by default; a Dask cluster through prefect-dask when asked (a local
cluster, or the scheduler address of an existing one). Only imputations go to the runner: reads
and writes stay in the flow's process, because DuckDB allows one writing process per file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from flows.settings import PipelineSettings
from tasks.errors import PipelineInputError

__all__ = ["describe_runner", "gpu_annotation", "runner_width", "started_runner", "task_runner"]


def task_runner(settings: PipelineSettings) -> Any:
    """A fresh, unstarted task runner for `settings` (enter it with `with`)."""
    if settings.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=settings.max_workers)
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": settings.dask_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,  # no web server on a port nobody asked for
            "env": _worker_env(settings.dask_workers, settings.torch_threads),
        }
    )


@contextlib.contextmanager
def started_runner(settings: PipelineSettings) -> Iterator[Any]:
    """`task_runner(settings)`, entered; with a Dask scheduler address, connected, and refused
    by name when it cannot be reached (a foreseen input, not a bug)."""
    with contextlib.ExitStack() as stack:
        runner = stack.enter_context(task_runner(settings))
        try:
            if settings.task_runner == "dask" and settings.dask_address:
                runner.client  # noqa: B018 - connects now (prefect-dask waits for a first task)
        except (OSError, ValueError) as error:  # unreachable; or not an address at all
            problem = (
                f"cannot be reached: {error}"
                if isinstance(error, OSError)
                else f"is not an address ({error}); give it as tcp://HOST:PORT"
            )
            raise PipelineInputError(
                f"The Dask scheduler at {settings.dask_address} (the --dask-address flag or "
                f"TDM_DASK_ADDRESS) {problem}. Nothing was imputed; start the scheduler, or "
                "leave the address out to run on a local cluster."
            ) from None
        yield runner


def _worker_env(n_workers: int, torch_threads: int | None = None) -> dict[str, str]:
    """Environment of local Dask workers: this run's Prefect API, and a share of the cores.

    Without an API URL each worker process would start a temporary Prefect server of its own
    (15-20 s each here) when the flow runs on the embedded default; given the flow's, task runs
    report to the same API. Each worker gets `torch_threads` threads for torch and BLAS (the
    pipeline's one thread setting), or, where that is 0 or unset, cores / workers, so that two
    workers do not oversubscribe the machine.
    """
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        api_url = str(client.api_url).rstrip("/")
    share = max(1, (os.cpu_count() or 1) // n_workers)
    threads = str(torch_threads if torch_threads else share)
    return {
        "PREFECT_API_URL": api_url,
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
    }


def runner_width(settings: PipelineSettings) -> int:
    """How many imputations the runner of `settings` runs at once (for a remote Dask cluster,
    its workers are unknown here: assume the local default)."""
    if settings.task_runner == "threads":
        return settings.max_workers
    return settings.dask_workers


def describe_runner(settings: PipelineSettings) -> str:
    """One line for logs and reports."""
    if settings.task_runner == "threads":
        return f"thread pool ({settings.max_workers} at once)"
    if settings.dask_address:
        return f"Dask cluster at {settings.dask_address}"
    return f"local Dask cluster ({settings.dask_workers} workers)"


@contextlib.contextmanager
def gpu_annotation(settings: PipelineSettings) -> Iterator[None]:
    """Within it, Dask tasks submitted need one `GPU` worker resource (when asked for)."""
    if settings.task_runner != "dask" or not settings.dask_gpu:
        yield
        return
    import dask

    with dask.annotate(resources={"GPU": 1}):
        yield
