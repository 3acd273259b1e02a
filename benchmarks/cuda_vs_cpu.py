"""TDM on a CUDA device against the CPU of the same machine: step times, a california fit,
the MAE on both devices, and whether CUDA repeats itself bit for bit.

Run: ``python -m benchmarks.cuda_vs_cpu [--parts steps,california,agreement,repeat]
[--tables a,b] [--out FILE] [--write]``; ``--out`` rewrites the section's text after every
measured line, so a run stopped early keeps what it measured.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from benchmarks._timing import (
    BATCH,
    MEASURED,
    N_ROWS,
    WARMUP,
    header,
    publish,
    synthetic,
    time_steps,
)
from benchmarks.datasets import DATASETS, load_dataset
from tdm import TDMImputer, mae, simulate_mcar

AGREEMENT_TABLES = (*DATASETS[:5], "california")  # the small tables and california
PARTS = ("steps", "california", "agreement", "repeat")
REPEAT_TABLE = "seeds"
REPEAT_STEPS = 300  # enough steps for the two runs to part, if they part at all


def step_times(d: int, device: str) -> tuple[float, float]:
    """Median ms between consecutive steps after a warm-up, and the median ms of the assignment
    solve inside them (the mean start: the step does not depend on the start)."""
    make = partial(TDMImputer, init="mean", batch_size=BATCH, device=device, random_state=0)
    timing = time_steps(make, synthetic(N_ROWS, d, seed=d))
    return timing.step_ms, timing.solve_ms


def timed_fit(make: Callable[[], TDMImputer], X_nan: np.ndarray) -> tuple[float, np.ndarray]:
    started = time.perf_counter()
    out = make().fit_transform(X_nan)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started, out


def masked(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = load_dataset(name).X
    mask = simulate_mcar(X, 0.3, random_state=seed)
    return X, np.where(mask, np.nan, X), mask


class Section:
    """The section's lines, written to ``out`` (when given) after every addition."""

    def __init__(self, out: Path | None) -> None:
        self.lines: list[str] = []
        self.out = out

    def add(self, *lines: str) -> None:
        self.lines += lines
        if self.out is not None:
            self.out.write_text(self.text() + "\n")

    def text(self) -> str:
        return "\n".join(self.lines)


def steps_part(section: Section) -> None:
    section.add(
        "",
        f"**Step** ({N_ROWS} rows, 30% MCAR, B = {BATCH}, median of {MEASURED} steps after "
        f"{WARMUP}; the assignment is solved on the CPU on both devices):",
        "",
        "| D | CPU ms / step | CUDA ms / step | CPU / CUDA | assignment ms (CPU run) "
        "| assignment ms (CUDA run) |",
        "|---|---|---|---|---|---|",
    )
    for d in (8, 41, 128):
        cpu_ms, cpu_solve = step_times(d, "cpu")
        gpu_ms, gpu_solve = step_times(d, "cuda")
        print(
            f"D={d}: cpu {cpu_ms:.2f} ms (solve {cpu_solve:.2f}), cuda {gpu_ms:.2f} ms "
            f"(solve {gpu_solve:.2f})",
            flush=True,
        )
        section.add(
            f"| {d} | {cpu_ms:.2f} | {gpu_ms:.2f} | **{cpu_ms / gpu_ms:.2f}** | "
            f"{cpu_solve:.2f} | {gpu_solve:.2f} |"
        )


def california_part(section: Section) -> None:
    X, X_nan, mask = masked("california")
    fits = [
        ("default, start only (`max_iter=1`)", {"max_iter": 1}),
        ("default (2,000 steps)", {}),
        ("default, the start's models on every core (`n_jobs=-1`)", {"n_jobs": -1}),
        ("paper mode (10,000 steps, mean start)", {"paper": True}),
    ]
    section.add(
        "",
        "**California** (20,640 x 8, 30% MCAR, mask seed 0, `random_state=0`), on CUDA, wall "
        "seconds from the call to `fit_transform` to its return (data on the host):",
        "",
        "| fit | seconds | MAE |",
        "|---|---|---|",
    )
    for label, params in fits:
        paper = params.pop("paper", False)

        def make(params: dict = params, paper: bool = paper) -> TDMImputer:
            if paper:
                return TDMImputer.paper(device="cuda", random_state=0, **params)
            return TDMImputer._configured(device="cuda", random_state=0, **params)

        seconds, out = timed_fit(make, X_nan)
        print(f"california {label}: {seconds:.2f} s, MAE {mae(X, out, mask):.4f}", flush=True)
        section.add(f"| {label} | {seconds:.2f} | {mae(X, out, mask):.4f} |")


def agreement_part(section: Section, tables: list[str]) -> None:
    section.add(
        "",
        "**CUDA against CPU** (default fit, float32, MCAR 30%, mask seed 0, `random_state=0`):",
        "",
        "| table | CPU MAE | CUDA MAE | difference | CPU s | CUDA s |",
        "|---|---|---|---|---|---|",
    )
    for name in tables:
        X, X_nan, mask = masked(name)
        results = {}
        for device in ("cpu", "cuda"):
            seconds, out = timed_fit(
                lambda device=device: TDMImputer(device=device, random_state=0), X_nan
            )
            results[device] = (mae(X, out, mask), seconds)
        (cpu_mae, cpu_s), (gpu_mae, gpu_s) = results["cpu"], results["cuda"]
        print(
            f"{name}: cpu {cpu_mae:.4f} ({cpu_s:.1f} s), cuda {gpu_mae:.4f} ({gpu_s:.1f} s)",
            flush=True,
        )
        section.add(
            f"| {name} | {cpu_mae:.4f} | {gpu_mae:.4f} | {gpu_mae - cpu_mae:+.4f} | "
            f"{cpu_s:.1f} | {gpu_s:.1f} |"
        )


def repeated(run: Callable[[], np.ndarray]) -> str:
    """'same bits' or how far two calls of ``run`` apart are; with deterministic algorithms on
    for the two calls alone, the error that names a nondeterministic operation is reported."""
    first, second = run(), run()
    if np.array_equal(first, second, equal_nan=True):
        return "same bits"
    return f"differ (max {np.nanmax(np.abs(first - second)):.2e})"


def deterministic(run: Callable[[], np.ndarray]) -> str:
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return repeated(run)
    except RuntimeError as error:
        return f"refused: {str(error).splitlines()[0][:120]}"
    finally:
        torch.use_deterministic_algorithms(before)


def repeat_part(section: Section) -> None:
    X, X_nan, _ = masked(REPEAT_TABLE)
    half = len(X) // 2

    def make() -> TDMImputer:
        return TDMImputer(device="cuda", random_state=0, max_iter=REPEAT_STEPS)

    # Steps asked for: after the default's trees start, transform runs none by default.
    fitted = make().set_params(transform_max_iter=REPEAT_STEPS).fit(X_nan[:half])

    def fit() -> np.ndarray:
        return make().fit_transform(X_nan)

    def new_rows() -> np.ndarray:
        return fitted.transform(X_nan[half:])

    section.add(
        "",
        f"**Does CUDA repeat itself?** ({REPEAT_TABLE}, MCAR 30%, mask seed 0, default TDM "
        f"with `max_iter={REPEAT_STEPS}`, `random_state=0`; each run twice in one process, "
        "compared bit for bit; "
        '"deterministic": `torch.use_deterministic_algorithms(True)` for those two runs, '
        "`CUBLAS_WORKSPACE_CONFIG` as set when the process started: "
        f"`{os.environ.get('CUBLAS_WORKSPACE_CONFIG', '')}`):",
        "",
        "| run | as shipped | deterministic |",
        "|---|---|---|",
    )
    for label, run in (
        ("fit_transform", fit),
        (
            f"transform of {len(X) - half} unseen rows ({REPEAT_STEPS} steps), one fitted imputer",
            new_rows,
        ),
    ):
        plain, strict = repeated(run), deterministic(run)
        print(f"repeat {label}: {plain}; deterministic: {strict}", flush=True)
        section.add(f"| {label} | {plain} | {strict} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument("--parts", default=",".join(PARTS), help="which of " + ", ".join(PARTS))
    parser.add_argument("--tables", default=",".join(AGREEMENT_TABLES), help="agreement tables")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        parser.error(f"--parts takes {', '.join(PARTS)}")
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.cuda_vs_cpu needs a CUDA device; none is available here")
    gpu = torch.cuda.get_device_properties(0)
    section = Section(args.out)
    section.add(
        *header(
            f"python -m benchmarks.cuda_vs_cpu --parts {args.parts} --tables {args.tables} --write",
            f"{gpu.name}, {gpu.total_memory / 2**30:.0f} GiB",
        )
    )
    run_part = {
        "steps": steps_part,
        "california": california_part,
        "agreement": lambda section: agreement_part(section, args.tables.split(",")),
        "repeat": repeat_part,
    }
    for part in parts:  # in the order given: the first ones are measured if time runs out
        run_part[part](section)
    publish("GPU", section.text(), write=args.write)


if __name__ == "__main__":
    main()
