"""The task runner `impute-warehouse` spreads imputations over, chosen by settings.

Threads in the flow's process by default; a Dask cluster through prefect-dask when asked (a local
cluster, or the scheduler address of an existing one). Only imputations go to the runner: reads
and writes stay in the flow's process, because DuckDB allows one writing process per file.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from flows.settings import PipelineSettings
from tasks.errors import PipelineError, PipelineInputError

__all__ = [
    "NO_WORKER_SECONDS",
    "describe_runner",
    "gpu_annotation",
    "runner_result",
    "runner_width",
    "started_runner",
    "task_runner",
]

NO_WORKER_SECONDS = 120.0
"""How long a run waits for a Dask cluster with no worker (none started yet, or all gone) to
get one, before it fails saying so."""
_POLL_SECONDS = 5.0
_ALONE_SINCE = "_tdm_no_worker_since"
"""Attribute of a run's Dask client: since when (`time.monotonic`) its cluster has had no
usable worker (None: it has one)."""


def task_runner(settings: PipelineSettings) -> Any:
    """A fresh, unstarted task runner for `settings` (enter it with `with`)."""
    if settings.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=settings.max_workers)
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    cluster = {
        "n_workers": settings.dask_workers,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,  # no web server on a port nobody asked for
        "env": _worker_env(settings.dask_workers, settings.torch_threads),
    }
    if settings.dask_gpu:  # the local workers share this machine's GPU
        import torch

        if not torch.cuda.is_available():
            raise PipelineInputError(
                "TDM_DASK_GPU asks for the imputations to run on Dask workers with a GPU, but "
                "this machine has no CUDA GPU for the local cluster's workers. Leave it out, or "
                "give the address of a cluster whose workers offer one (TDM_DASK_ADDRESS; "
                "`dask worker ... --resources GPU=1`)."
            )
        cluster["resources"] = {"GPU": 1}
    return DaskTaskRunner(cluster_kwargs=cluster)


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
                f"The Dask scheduler at {settings.dask_address} (TDM_DASK_ADDRESS, or `tdm "
                f"warehouse --dask-address`) {problem}. Nothing was imputed; start the "
                "scheduler, or leave the address out to run on a local cluster."
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


def runner_result(future: Any, settings: PipelineSettings, table: str, what: str) -> Any:
    """`future.result()` of an imputation submitted to the runner of `settings`. On a Dask
    cluster, what the cluster does to it is a `PipelineError` naming `table`, `what` ("the
    fit", "partition 3") and the cluster, not a traceback or a wait for ever: a worker that
    died running it (often out of memory), the scheduler lost, no worker able to run it, or
    no worker at all for `NO_WORKER_SECONDS` (counted once per run's client: the tables after
    the first that waited fail at once)."""
    if settings.task_runner != "dask":
        return future.result()
    import distributed

    def failed(reason: str) -> PipelineError:
        return PipelineError(
            f'Table "{table}": {what} failed on the {describe_runner(settings)}: {reason}. '
            f'Nothing of "{table}" was written.'
        )

    inner = future.wrapped_future
    try:
        while True:
            try:  # the wrapped future holds the task's final state: only the cluster raises
                inner.result(timeout=_POLL_SECONDS)
                break
            except distributed.TimeoutError:
                if inner.done():  # it ended in a timeout of its own: `future.result()` says
                    break
                client = inner.client
                if _usable_workers(client, settings):
                    setattr(client, _ALONE_SINCE, None)
                    continue
                # On the run's client: the next table does not wait as long again.
                now = time.monotonic()
                alone_since = getattr(client, _ALONE_SINCE, None) or now
                setattr(client, _ALONE_SINCE, alone_since)
                if now - alone_since >= NO_WORKER_SECONDS:
                    inner.cancel()
                    gpu = " offering the GPU resource TDM_DASK_GPU asks for" * settings.dask_gpu
                    raise failed(
                        f"the cluster has had no worker{gpu} for {NO_WORKER_SECONDS:g} s (none "
                        "started, or all stopped); start workers on it and run again"
                    ) from None
        return future.result()
    except distributed.scheduler.KilledWorker:
        raise failed(
            "the workers that ran it died (most often out of memory: lower TDM_PARTITION_ROWS "
            "or TDM_MAX_FIT_ROWS, or give the workers more memory)"
        ) from None
    except distributed.scheduler.NoValidWorkerError:
        raise failed(
            "no worker can run it (with TDM_DASK_GPU, none offers the GPU resource)"
        ) from None
    except distributed.comm.CommClosedError as error:
        raise failed(f"the connection to the Dask scheduler was lost ({error})") from None
    except distributed.client.FutureCancelledError as error:
        reason = str(getattr(error, "reason", "") or "")
        if "connection-lost" in reason:
            raise failed(f"the connection to the Dask scheduler was lost ({reason})") from None
        raise failed(f"its Dask task was cancelled ({reason or 'no reason given'})") from None


def _usable_workers(client: Any, settings: PipelineSettings) -> int:
    """How many workers of `client`'s cluster can run an imputation (one offering a `GPU`
    resource, with `TDM_DASK_GPU`)."""
    workers = client.scheduler_info().get("workers", {}).values()
    if not settings.dask_gpu:
        return len(workers)
    return sum(1 for worker in workers if (worker.get("resources") or {}).get("GPU"))
