"""Time of one TDM iteration at B = 512 against one POT ``ot.emd`` solve in the same run.

Run: ``python -m benchmarks.iteration_speed [--device cpu|cuda] [--write]``.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import ot
import torch
from scipy.optimize import linear_sum_assignment

from benchmarks._timing import (
    BATCH,
    MEASURED,
    N_ROWS,
    WARMUP,
    command,
    header,
    median_ms,
    publish,
    synthetic,
    time_steps,
)
from tdm import OTImputer, TDMImputer
from tdm.transport import ASSIGNMENT_GRID, assignment


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
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where present [cpu]")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    if args.device not in ("cpu", "cuda") or (
        args.device == "cuda" and not torch.cuda.is_available()
    ):
        parser.error(
            f"--device takes cpu, or cuda where a CUDA device is present; got {args.device!r}"
        )

    rows = []
    matrices: list[np.ndarray] = []
    uniform = np.full(BATCH, 1.0 / BATCH)
    for d in (8, 41):
        X = synthetic(N_ROWS, d, seed=d)
        rng = np.random.default_rng(0)
        Xf = np.where(np.isnan(X), 0.0, X)
        C = ot.dist(Xf[rng.choice(N_ROWS, BATCH)], Xf[rng.choice(N_ROWS, BATCH)])  # float64
        emd_ms = median_ms(lambda C=C: ot.emd(uniform, uniform, C), 20)
        lapjv_ms = median_ms(lambda C=C: assignment(C.astype(np.float32)), 20)
        scipy_ms = median_ms(lambda C=C: linear_sum_assignment(C), 20)
        common = {"batch_size": BATCH, "device": args.device, "random_state": 0}
        for label, cls, params in [
            ("TDM (default)", TDMImputer, {}),
            ("TDM (paper settings)", TDMImputer.paper, {}),
            ("OTImputer NS", OTImputer, {"solver": "assignment"}),
        ]:
            make = partial(cls, **{**params, **common})
            timing = time_steps(make, X)
            matrices += timing.matrices
            emd_own_ms = float(
                np.median(
                    [
                        median_ms(lambda C=C: ot.emd(uniform, uniform, C.astype(np.float64)), 1)
                        for C in timing.matrices
                    ]
                )
            )
            it_ms = timing.step_ms
            rows.append((d, label, it_ms, emd_ms, emd_own_ms, lapjv_ms, scipy_ms))
            print(
                f"D={d:2d} {label:21s} {it_ms:7.2f} ms/iteration  ot.emd {emd_ms:6.2f} ms  "
                f"ratio {it_ms / emd_ms:.2f}  ot.emd on its own matrices {emd_own_ms:6.2f} ms  "
                f"ratio {it_ms / emd_own_ms:.2f}  (lapjv {lapjv_ms:.2f}, scipy {scipy_ms:.2f} ms)",
                flush=True,
            )

    device = args.device
    if device.startswith("cuda"):
        device += f", {torch.cuda.get_device_name(0)}"
    lines = [
        *header(command("iteration_speed"), device),
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
    raw, quantised, exact, excess = np.array(solver_times(matrices)).T
    lines += [
        "",
        f"Assignment solvers on the {len(raw)} cost matrices the fits above solved (median ms): "
        f"LAPJV on the raw costs {np.median(raw):.2f}, LAPJV on costs rounded to "
        f"a grid of 1/{ASSIGNMENT_GRID:.0e} of the largest (`tdm.transport.quantise`, the default) "
        f"{np.median(quantised):.2f}, SciPy `linear_sum_assignment` {np.median(exact):.2f}; "
        f"the rounded solution's true cost exceeded SciPy's optimum by at most {excess.max():.1e} "
        f"(relative) and was optimal on {int((excess <= 1e-12).sum())} of {len(excess)}.",
    ]
    publish(f"Speed ({args.device})", "\n".join(lines), write=args.write)


if __name__ == "__main__":
    main()
