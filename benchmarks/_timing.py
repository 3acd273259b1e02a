"""What the speed benchmarks share: seeded synthetic tables, step timing, the machine's
description, Prefect's start, and the BENCHMARKS.md section each one writes."""

from __future__ import annotations

import math
import os
import platform
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BATCH",
    "BENCHMARKS",
    "MEASURED",
    "N_ROWS",
    "WARMUP",
    "StepTiming",
    "command",
    "events",
    "header",
    "median_ms",
    "number_cell",
    "publish",
    "replace_section",
    "start_prefect",
    "synthetic",
    "time_steps",
    "write_events",
]

#: The step benchmarks' table rows, batch size, and warm-up and measured steps.
N_ROWS = 4096
BATCH = 512
WARMUP = 20
MEASURED = 200
BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
_HEADER = (
    "# Benchmarks\n\n"
    "Every section is written by the command it names; machines here are shared and noisy, so\n"
    "each compares against a baseline measured in the same run (ratios).\n"
)


def replace_section(title: str, body: str, path: Path = BENCHMARKS) -> None:
    """Replace (or append) the section ``## {title}`` of ``path`` with ``body``."""
    text = path.read_text() if path.exists() else _HEADER
    block = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text)


def number_cell(value: float, digits: int = 3) -> str:
    """A table cell of ``value`` with ``digits`` decimals; "-" where it is NaN (not measured)."""
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def publish(title: str, body: str, *, write: bool) -> None:
    """Print the section; with ``write``, put it in BENCHMARKS.md too."""
    if write:
        replace_section(title, body)
    print(f"## {title}\n\n{body}")


def header(command: str, device: str = "") -> list[str]:
    """A section's first lines: the command that wrote it and the date, then the machine (its
    cores, Python, torch and torch's threads) and, when given, the ``device`` in words."""
    import torch

    machine = (
        f"{os.cpu_count()} CPU cores ({platform.machine()}), CPython "
        f"{platform.python_version()}, torch {torch.__version__} on "
        f"{torch.get_num_threads()} thread(s)"
    )
    return [
        f"Command: `{command}`; {datetime.now(UTC):%Y-%m-%d}.",
        f"Machine: {machine}{f'; device: {device}' if device else ''}.",
    ]


def command(module: str, argv: Sequence[str] | None = None) -> str:
    """The command that ran, to run it again: ``python -m benchmarks.<module>`` with its
    arguments as given (``argv``, default this process's), after ``OMP_NUM_THREADS`` when it is
    set, as torch reads its thread count from it."""
    words = list(sys.argv[1:] if argv is None else argv)
    threads = os.environ.get("OMP_NUM_THREADS")
    env = f"OMP_NUM_THREADS={threads} " if threads else ""
    return f"{env}python -m benchmarks.{module} {shlex.join(words)}".rstrip()


def start_prefect(torch_threads: int | None) -> None:
    """Set torch's threads (when given) and start Prefect's API with a no-op flow, so that the
    temporary server's start is not timed; analytics stay off."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    import torch
    from prefect import flow

    if torch_threads is not None:
        torch.set_num_threads(torch_threads)

    @flow(name="warm-up")
    def warm_up() -> None:
        """Start the Prefect API (temporary server) before timing."""

    warm_up()


def synthetic(n: int, d: int, seed: int) -> np.ndarray:
    """Correlated Gaussian data with 30% of cells missing completely at random (row 0 whole)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) / np.sqrt(d)
    X[rng.random(X.shape) < 0.3] = np.nan
    X[0] = 0.0
    return X


def events(
    start: int,
    count: int,
    *,
    n_numeric: int,
    seed: int,
    missing_rate: float = 0.2,
    dates_and_flags: bool = False,
) -> pd.DataFrame:
    """Rows ``start .. start + count - 1`` of the seeded table ``events``: a key, ``n_numeric``
    correlated numeric columns (``missing_rate`` missing), a text column and, with
    ``dates_and_flags``, a date and a boolean; later batches follow the first's distribution."""
    loadings = np.random.default_rng(seed).normal(size=(3, n_numeric))
    rng = np.random.default_rng([seed, start])
    numeric = rng.normal(size=(count, 3)) @ loadings + 0.3 * rng.normal(size=(count, n_numeric))
    numeric[rng.random(numeric.shape) < missing_rate] = np.nan
    frame = pd.DataFrame(numeric * 10 + 100, columns=[f"x{j}" for j in range(n_numeric)])
    frame.insert(0, "event_id", np.arange(start, start + count, dtype=np.int64))
    frame["region"] = rng.choice(["north", "south", "east", "west"], count)
    if dates_and_flags:
        days = pd.to_timedelta(rng.integers(0, 365, count), "D")
        frame["day"] = (pd.Timestamp("2024-01-01") + days).date
        frame["flagged"] = rng.random(count) < 0.1
    return frame


def write_events(path: Path, frame: pd.DataFrame, *, create: bool = True) -> None:
    """Create the table ``events`` of the DuckDB file ``path`` from ``frame``, or append."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.register("frame", frame)
        if create:
            con.execute("CREATE TABLE events AS SELECT * FROM frame")
        else:
            con.execute("INSERT INTO events SELECT * FROM frame")


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall milliseconds of ``repeats`` calls of ``fn``, after one call not timed."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


@dataclass(frozen=True)
class StepTiming:
    """Median milliseconds of one optimisation step and of the assignment solve inside it (after
    the warm-up), and the cost matrices of every ``keep_every``-th measured step."""

    step_ms: float
    solve_ms: float
    matrices: list[np.ndarray] = field(default_factory=list)


def time_steps(
    make: Callable[..., Any],
    X: np.ndarray,
    *,
    warmup: int = WARMUP,
    measured: int = MEASURED,
    keep_every: int = 20,
) -> StepTiming:
    """Fit ``make(max_iter=warmup + measured, callback=...)`` on ``X``, timing each step and the
    assignment solve inside it (wrapped for the fit, keeping every ``keep_every``-th matrix)."""
    from tdm import transport

    stamps: list[float] = []
    solves: list[float] = []
    kept: list[np.ndarray] = []
    solve = transport.assignment

    def timed(C: np.ndarray) -> np.ndarray:
        if len(stamps) >= warmup and len(stamps) % keep_every == 0:
            kept.append(C.copy())
        started = time.perf_counter()
        out = solve(C)
        solves.append(time.perf_counter() - started)
        return out

    def record(_: object) -> None:
        stamps.append(time.perf_counter())

    transport.assignment = timed
    try:
        make(max_iter=warmup + measured, callback=record).fit(X)
    finally:
        transport.assignment = solve
    steps = np.diff(stamps[warmup:]) * 1e3
    return StepTiming(float(np.median(steps)), statistics.median(solves[warmup:]) * 1e3, kept)
