"""Per-iteration speed of TDM at B = 512, against one POT ``ot.emd`` solve measured in the same run.

The figure is the ratio (machines here are shared and noisy): target, a whole TDM iteration at
D = 8 costs less than 0.6x one exact ``ot.emd`` solve on a 512 x 512 cost matrix.

Run: ``.venv/bin/python -m benchmarks.speed [--device cpu|cuda] [--write]``; ``--write`` replaces
the "Speed" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import ot
import torch
from scipy.optimize import linear_sum_assignment

from benchmarks._report import replace_section
from tdm import FitProgress, OTImputer, TDMImputer, transport
from tdm.transport import ASSIGNMENT_GRID, assignment

BATCH = 512
N_ROWS = 4096
WARMUP = 20
MEASURED = 200


def synthetic(n: int, d: int, seed: int) -> np.ndarray:
    """Correlated Gaussian data with 30% of cells missing completely at random."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) / np.sqrt(d)
    X[rng.random(X.shape) < 0.3] = np.nan
    X[0] = 0.0
    return X


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def per_iteration_ms(
    make: Callable[..., TDMImputer | OTImputer], X: np.ndarray
) -> tuple[float, float]:
    """Median wall time between consecutive steps after a warm-up, and the median time of one
    ``ot.emd`` solve on the fit's own cost matrices (every 20th measured step)."""
    stamps: list[float] = []
    captured: list[np.ndarray] = []

    def record(_: FitProgress) -> None:
        stamps.append(time.perf_counter())

    def capture(C: np.ndarray) -> np.ndarray:
        if len(stamps) >= WARMUP and len(stamps) % 20 == 0:
            captured.append(C.copy())
        return solve(C)

    solve = transport.assignment
    transport.assignment = capture  # observe the solver's inputs; the timed steps include this
    try:
        make(max_iter=WARMUP + MEASURED, callback=record).fit(X)
    finally:
        transport.assignment = solve
    intervals = np.diff(stamps[WARMUP:])
    SOLVER_TIMES.extend(solver_times(captured))
    uniform = np.full(BATCH, 1.0 / BATCH)
    emd_own = [
        median_ms(lambda C=C: ot.emd(uniform, uniform, C.astype(np.float64)), 1) for C in captured
    ]
    return float(np.median(intervals) * 1e3), float(np.median(emd_own))


SOLVER_TIMES: list[tuple[float, float, float, float]] = []


def solver_times(matrices: list[np.ndarray]) -> list[tuple[float, float, float, float]]:
    """Per fit matrix: LAPJV on the raw costs, LAPJV on the quantised costs (what `assignment`
    does), SciPy, and the relative excess of the quantised solution's true cost over SciPy's."""
    from lapjv import lapjv

    out = []
    for C in matrices:
        C64 = C.astype(np.float64)
        raw = median_ms(lambda C=C: lapjv(np.ascontiguousarray(C / np.abs(C).max())), 3)
        quantised = median_ms(lambda C=C: assignment(C), 3)
        exact = median_ms(lambda C=C64: linear_sum_assignment(C), 3)
        rows, cols = linear_sum_assignment(C64)
        best = C64[rows, cols].sum()
        excess = (C64[np.arange(len(C)), assignment(C)].sum() - best) / best
        out.append((raw, quantised, exact, float(excess)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()

    rows = []
    for d in (8, 41):
        X = synthetic(N_ROWS, d, seed=d)
        rng = np.random.default_rng(0)
        Xf = np.where(np.isnan(X), 0.0, X)
        a, b = Xf[rng.choice(N_ROWS, BATCH)], Xf[rng.choice(N_ROWS, BATCH)]
        C = ot.dist(a, b)  # squared Euclidean, float64
        uniform = np.full(BATCH, 1.0 / BATCH)
        emd_ms = median_ms(lambda C=C, w=uniform: ot.emd(w, w, C), 20)
        lapjv_ms = median_ms(lambda C=C: assignment(C.astype(np.float32)), 20)
        scipy_ms = median_ms(lambda C=C: linear_sum_assignment(C), 20)
        common = {"batch_size": BATCH, "device": args.device, "random_state": 0}
        for label, cls, params in [
            ("TDM (default)", TDMImputer, {}),
            ("TDM (paper settings)", TDMImputer.paper, {}),
            ("OTImputer NS", OTImputer, {"solver": "assignment"}),
        ]:
            it_ms, emd_own_ms = per_iteration_ms(partial(cls, **{**params, **common}), X)
            rows.append((d, label, it_ms, emd_ms, emd_own_ms, lapjv_ms, scipy_ms))
            print(
                f"D={d:2d} {label:21s} {it_ms:7.2f} ms/iteration  ot.emd {emd_ms:6.2f} ms  "
                f"ratio {it_ms / emd_ms:.2f}  ot.emd on its own matrices {emd_own_ms:6.2f} ms  "
                f"ratio {it_ms / emd_own_ms:.2f}  (lapjv {lapjv_ms:.2f}, scipy {scipy_ms:.2f} ms)",
                flush=True,
            )

    machine = (
        f"{platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"{platform.python_implementation()} {platform.python_version()}, torch {torch.__version__}"
    )
    if args.device.startswith("cuda"):
        machine += f", {torch.cuda.get_device_name(0)}"
    lines = [
        f"Command: `.venv/bin/python -m benchmarks.speed --device {args.device} --write`  ",
        f"Date: {dt.date.today().isoformat()}; machine: {machine}; device: {args.device}.  ",
        f"Data: {N_ROWS} rows, 30% MCAR, batch {BATCH}; median of {MEASURED} steps after "
        f"{WARMUP} warm-up steps. One `ot.emd` solve (POT network simplex, 512 x 512, float64) "
        "is timed in the same run, on the squared distances of two batches of the data "
        "(`ot.emd` ref.), and on the cost matrices the fit itself solved (every 20th step; "
        "`ot.emd` own): the ratios are the figures (target at D = 8: < 0.6). The last two "
        "columns time the assignment solvers on the reference matrix.",
        "",
        "| D | imputer | ms / iteration | ot.emd ref. ms | ratio | ot.emd own ms | ratio "
        "| lapjv ms | scipy LSA ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d, label, it_ms, emd_ms, emd_own_ms, lapjv_ms, scipy_ms in rows:
        lines.append(
            f"| {d} | {label} | {it_ms:.2f} | {emd_ms:.2f} | **{it_ms / emd_ms:.2f}** | "
            f"{emd_own_ms:.2f} | **{it_ms / emd_own_ms:.2f}** | {lapjv_ms:.2f} | {scipy_ms:.2f} |"
        )
    raw, quantised, exact, excess = np.array(SOLVER_TIMES).T
    lines += [
        "",
        f"Assignment solvers on the {len(raw)} cost matrices the fits above solved (median ms): "
        f"LAPJV on the raw costs {np.median(raw):.2f}, LAPJV on costs rounded to "
        f"a grid of 1/{ASSIGNMENT_GRID:.0e} of the largest (`tdm.transport.quantise`, the default) "
        f"{np.median(quantised):.2f}, SciPy `linear_sum_assignment` {np.median(exact):.2f}; "
        f"the rounded solution's true cost exceeded SciPy's optimum by at most {excess.max():.1e} "
        f"(relative) and was optimal on {int((excess <= 1e-12).sum())} of {len(excess)}.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        replace_section(f"Speed ({args.device})", text)


if __name__ == "__main__":
    main()
