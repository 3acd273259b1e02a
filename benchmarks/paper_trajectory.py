"""Paper mode's MAE trajectory beside the published TDM code's, on the published code's own masks
(issue 19).

Run: ``python -m benchmarks.paper_trajectory [--seeds 0,1,2] [--set NAME=VALUE ...] [--write]``.
Three scikit-learn datasets (wine, breast_cancer, diabetes; features only, standardised with
``sklearn.preprocessing.scale``), their 30% MCAR masks drawn by the published code's mask
function (``benchmarks/reference/``, seeds 0-2), and :meth:`TDMImputer.paper` (``random_state``
1000 + seed, ``--set`` overriding a setting, e.g. ``--set dtype=float64``) fitted for 10,000
steps, one torch thread. The MAE of the masked cells (standardised space) is read after 1,000,
2,000, 3,000, 5,000, 6,000 and 10,000 steps of the one fit, and printed, mean over the seeds,
beside the published code's mean MAE at the same steps (:data:`PUBLISHED`, measured with its own
``run_TDM`` on these masks).
"""

from __future__ import annotations

import argparse
import ast
import platform
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn import datasets
from sklearn.preprocessing import scale

from benchmarks._report import replace_section
from tdm import TDMImputer

SECTION = "Paper mode against the published code (reference masks)"
MASKS = Path(__file__).resolve().parent / "reference"
CHECKPOINTS = (1_000, 2_000, 3_000, 5_000, 6_000, 10_000)
LOADERS: dict[str, Callable[..., Any]] = {
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "diabetes": datasets.load_diabetes,
}
#: The published code's mean MAE at each checkpoint on these masks (hezgit/TDM at c75bc06,
#: float64, one torch thread, RNG seeded 1000 + seed, its own ``run_TDM``), seeds 0-2: wine from
#: ``../shared/reference``; breast_cancer run here (session 8, every checkpoint); diabetes seed
#: 0 from ``../shared/reference`` and seeds 1-2 run here (session 7) beyond 2,000 steps.
PUBLISHED: dict[str, dict[int, float | None]] = {
    "wine": {1000: 0.765, 2000: 0.629, 3000: 0.630, 5000: 0.639, 6000: 0.641, 10000: 0.674},
    "breast_cancer": {
        1000: 0.739,
        2000: 0.678,
        3000: 0.624,
        5000: 0.552,
        6000: 0.473,
        10000: 0.331,
    },
    "diabetes": {1000: 0.725, 2000: 0.552, 3000: 0.553, 5000: 0.564, 6000: 0.572, 10000: 0.596},
}


class _Trajectory(TDMImputer):
    """:class:`TDMImputer` recording its completed standardised matrix at each checkpoint."""

    def _run(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        project = kwargs.get("after_step")
        if kwargs.get("stage") != "fit" or project is None:
            return super()._run(step, *args, **kwargs)
        cells = project.__self__  # the fit's MissingCells, whose projection runs every step
        self.snapshots_: dict[int, np.ndarray] = {}
        done = 0

        def after_step() -> None:
            nonlocal done
            project()
            done += 1
            if done in CHECKPOINTS:
                self.snapshots_[done] = cells.result() * self.scale_ + self.mean_

        return super()._run(step, *args, **{**kwargs, "after_step": after_step})


def run_one(name: str, seed: int, settings: dict[str, Any]) -> dict[str, Any]:
    """One paper-mode fit of 10,000 steps: the masked cells' MAE at each checkpoint."""
    X = scale(LOADERS[name]().data)
    mask = np.load(MASKS / f"{name}_MCAR_p0.3_seed{seed}.npy")
    est = _Trajectory(**{**TDMImputer.paper().get_params(), "random_state": 1000 + seed})
    est.set_params(max_iter=max(CHECKPOINTS), device="cpu", **settings)
    started = time.perf_counter()
    est.fit(np.where(mask, np.nan, X))
    seconds = time.perf_counter() - started
    row: dict[Any, Any] = {"dataset": name, "seed": seed, "seconds": seconds}
    for at, values in est.snapshots_.items():
        row[at] = float(np.abs(values[mask] - X[mask]).mean())
    return row


def report(rows: pd.DataFrame, settings: dict[str, Any], seeds: list[int]) -> str:
    """Markdown: per dataset, paper mode's mean MAE (and spread) beside the published code's."""
    header = " | ".join(f"{at:,}" for at in CHECKPOINTS)
    lines = [
        "Command: `python -m benchmarks.paper_trajectory --write"
        + "".join(f" --set {k}={v}" for k, v in settings.items())
        + "`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, torch "
        f"{torch.__version__}, 1 torch thread.  ",
        f"`TDMImputer.paper()` ({', '.join(f'{k}={v}' for k, v in settings.items()) or 'as is'}"
        f"), seeds {', '.join(map(str, seeds))} (`random_state` 1000 + seed) on the published "
        "code's 30% MCAR masks; MAE of the masked cells in the standardised space after each "
        "number of steps of one fit, mean (and sample std) over the seeds; the published code's "
        "mean on the same masks below it (`benchmarks/reference/`, `PUBLISHED`); difference = "
        "ours - published.",
        "",
        f"| dataset | | {header} | s / fit |",
        "|---|---|" + "---|" * len(CHECKPOINTS) + "---|",
    ]
    for name in LOADERS:
        fits = rows[rows.dataset == name]
        if fits.empty:
            continue
        mean, std = fits[list(CHECKPOINTS)].mean(), fits[list(CHECKPOINTS)].std()
        ours = " | ".join(f"{mean[at]:.3f} (± {std[at]:.3f})" for at in CHECKPOINTS)
        published = PUBLISHED[name]
        theirs = " | ".join(f"{published[at]:.3f}" if published[at] else "-" for at in CHECKPOINTS)
        gaps = " | ".join(
            f"{mean[at] - published[at]:+.3f}" if published[at] else "-" for at in CHECKPOINTS
        )
        lines += [
            f"| {name} | paper mode | {ours} | {fits.seconds.mean():.0f} |",
            f"| | published code | {theirs} | |",
            f"| | difference | {gaps} | |",
        ]
    return "\n".join(lines) + "\n"


def _setting(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value  # a bare word: a string setting such as dtype=float64


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(LOADERS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE, a setting")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = dict(_setting(s) for s in args.set)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for name in args.datasets.split(","):
        for seed in seeds:
            rows.append(run_one(name, seed, settings))
            print(rows[-1], flush=True)
    text = report(pd.DataFrame(rows), settings, seeds)
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
