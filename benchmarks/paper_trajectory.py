"""Paper mode's MAE trajectory beside the published TDM code's, on the published code's own masks
(issue 19).

Run: ``python -m benchmarks.paper_trajectory [--seeds 0,1,2] [--runs 3] [--runs-for NAME=N ...]
[--set NAME=VALUE ...] [--cache FILE] [--write]``. Three scikit-learn datasets (wine,
breast_cancer, diabetes; features only, standardised with ``sklearn.preprocessing.scale``),
their 30% MCAR masks drawn by the published code's mask function (``benchmarks/reference/``,
seeds 0-2), and :meth:`TDMImputer.paper` (``--set`` overriding a setting, e.g. ``--set
dtype=float64``) fitted ``--runs`` times on each mask (``--runs-for``: another number for one
dataset; ``random_state`` 1000 (r + 1) + seed for run r), 10,000 steps, one torch thread. The MAE
of the masked cells (standardised space) is read after 1,000, 2,000, 3,000, 5,000, 6,000 and
10,000 steps of each fit, and printed, mean over the fits, beside the published code's mean MAE
at the same steps (:data:`PUBLISHED`, measured with its own ``run_TDM`` on these masks).
``--cache FILE`` keeps each fit's row in a CSV file, keyed by dataset, mask, random state and
every estimator parameter: a fit already there is read instead of run, so an interrupted run
resumes and two processes can share the work.
"""

from __future__ import annotations

import argparse
import ast
import json
import platform
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats
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
#: float64, one torch thread, its own ``run_TDM``), and the number of fits it is the mean of
#: (:data:`PUBLISHED_FITS`): wine, seeds 0-2 with the RNG seeded 1000 + seed, from
#: ``../shared/reference``; breast_cancer (seeds 0-2, RNG seeded 1000 (r + 1) + seed for
#: r = 0-19) and diabetes (seeds 0-2, r = 0) run here by
#: :mod:`benchmarks.published_trajectory` (its fits are in
#: ``results/issue19/paper_trajectory_fits.csv``). The report
#: takes the fits from ``--cache`` where it has them, these means where not.
PUBLISHED: dict[str, dict[int, float | None]] = {
    "wine": {1000: 0.765, 2000: 0.629, 3000: 0.630, 5000: 0.639, 6000: 0.641, 10000: 0.674},
    "breast_cancer": {
        1000: 0.738,
        2000: 0.692,
        3000: 0.636,
        5000: 0.556,
        6000: 0.498,
        10000: 0.347,
    },
    "diabetes": {1000: 0.725, 2000: 0.552, 3000: 0.544, 5000: 0.568, 6000: 0.573, 10000: 0.593},
}
PUBLISHED_FITS = {"wine": 3, "breast_cancer": 60, "diabetes": 3}
#: The ``params`` of the published code's rows in a cache (:mod:`benchmarks.published_trajectory`).
PUBLISHED_KEY = "published"


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


def run_one(name: str, seed: int, random_state: int, *, settings: dict[str, Any]) -> dict[str, Any]:
    """One paper-mode fit of 10,000 steps: the masked cells' MAE at each checkpoint."""
    X = scale(LOADERS[name]().data)
    mask = np.load(MASKS / f"{name}_MCAR_p0.3_seed{seed}.npy")
    est = _Trajectory(**{**TDMImputer.paper().get_params(), "random_state": random_state})
    est.set_params(max_iter=max(CHECKPOINTS), device="cpu", **settings)
    started = time.perf_counter()
    est.fit(np.where(mask, np.nan, X))
    seconds = time.perf_counter() - started
    row: dict[Any, Any] = {"dataset": name, "seed": seed, "random_state": random_state}
    row["params"], row["seconds"] = fit_key(settings), seconds
    for at, values in est.snapshots_.items():
        row[at] = float(np.abs(values[mask] - X[mask]).mean())
    return row


def fit_key(settings: dict[str, Any]) -> str:
    """Every parameter of the fit but its random state, as sorted JSON (the cache's key: it
    names no library version, so a cache is dropped when the library's code of a fit changes)."""
    params = {**TDMImputer.paper().get_params(), "max_iter": max(CHECKPOINTS), **settings}
    params.pop("random_state")
    return json.dumps(params, sort_keys=True, default=str)


def cached_rows(path: Path | None) -> pd.DataFrame:
    """The fits kept in ``path`` (none when it is ``None`` or absent), checkpoints as columns."""
    if path is None or not path.exists():
        return pd.DataFrame(columns=["dataset", "seed", "random_state", "params"])
    rows = pd.read_csv(path)
    return rows.rename(columns={str(at): at for at in CHECKPOINTS})


def fits(
    names: list[str], seeds: list[int], runs: int, settings: dict[str, Any], cache: Path | None
) -> pd.DataFrame:
    """Each dataset's fits, ``runs`` per mask: read from ``cache`` when kept there, else run (and
    appended to ``cache``)."""
    key = fit_key(settings)
    return each_fit(names, seeds, runs, key, cache, lambda *fit: run_one(*fit, settings=settings))


def each_fit(
    names: list[str],
    seeds: list[int],
    runs: int,
    key: str,
    cache: Path | None,
    run: Callable[[str, int, int], dict[str, Any]],
) -> pd.DataFrame:
    """``run(dataset, seed, random_state)`` for ``runs`` fits on each mask (``random_state``
    1000 (r + 1) + seed for fit r), unless ``cache`` keeps that fit under ``key``; each new row
    is printed and appended to ``cache``."""
    rows = []
    for name in names:
        for seed in seeds:
            for r in range(runs):
                random_state = 1000 * (r + 1) + seed
                kept = cached_rows(cache)
                kept = kept[
                    (kept.dataset == name)
                    & (kept.seed == seed)
                    & (kept.random_state == random_state)
                    & (kept.params == key)
                ]
                if not kept.empty:
                    rows.append(kept.iloc[0].to_dict())
                    continue
                rows.append(run(name, seed, random_state))
                print({k: v for k, v in rows[-1].items() if k != "params"}, flush=True)
                if cache is not None:
                    pd.DataFrame([rows[-1]]).to_csv(
                        cache, mode="a", header=not cache.exists(), index=False
                    )
    return pd.DataFrame(rows)


def report(
    rows: pd.DataFrame,
    settings: dict[str, Any],
    seeds: list[int],
    runs: int,
    published: pd.DataFrame | None = None,
    cache: Path | None = None,
    runs_for: dict[str, int] | None = None,
) -> str:
    """Markdown: per dataset, paper mode's mean MAE (and spread) beside the published code's.

    ``published`` holds fits of the published code (:mod:`benchmarks.published_trajectory`
    rows): where it has some of a dataset on ``seeds``, their mean replaces :data:`PUBLISHED`,
    and each checkpoint's difference gets Welch's two-sided t-test p-value over the fits.
    ``runs_for`` names datasets fitted another number of times a mask than ``runs``.
    """
    runs_for = runs_for or {}
    header = " | ".join(f"{at:,}" for at in CHECKPOINTS)
    lines = [
        f"Command: `python -m benchmarks.paper_trajectory --runs {runs} --write"
        + "".join(f" --runs-for {k}={v}" for k, v in runs_for.items())
        + "".join(f" --set {k}={v}" for k, v in settings.items())
        + (f" --cache {cache}" if cache is not None else "")
        + "`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, torch "
        f"{torch.__version__}, 1 torch thread.  ",
        f"`TDMImputer.paper()` ({', '.join(f'{k}={v}' for k, v in settings.items()) or 'as is'}"
        f"), {runs} fits on each of the published code's 30% MCAR masks"
        + "".join(f" ({k}: {v})" for k, v in runs_for.items())
        + ", seeds "
        f"{', '.join(map(str, seeds))} (`random_state` 1000 (r + 1) + seed for fit r); MAE of "
        "the masked cells in the standardised space after each number of steps of a fit, mean "
        "(and sample std) over the fits; the published code's mean on the same masks below it, "
        "over the number of its fits in brackets (its fits run by "
        "`benchmarks.published_trajectory` where there are any, else `PUBLISHED`); difference = "
        "ours - published, with Welch's t-test p-value where both sides' fits are here.",
        "",
        f"| dataset | | {header} | s / fit |",
        "|---|---|" + "---|" * len(CHECKPOINTS) + "---|",
    ]
    for name in LOADERS:
        done = rows[rows.dataset == name]
        if done.empty:
            continue
        mean, std = done[list(CHECKPOINTS)].mean(), done[list(CHECKPOINTS)].std()
        ours = " | ".join(f"{mean[at]:.3f} (± {std[at]:.3f})" for at in CHECKPOINTS)
        theirs_fits = _published_fits(published, name, seeds)
        if theirs_fits.empty:
            reference, n_theirs = dict(PUBLISHED[name]), PUBLISHED_FITS[name]
        else:
            reference = {at: float(theirs_fits[at].mean()) for at in CHECKPOINTS}
            n_theirs = len(theirs_fits)
        theirs = " | ".join(f"{reference[at]:.3f}" if reference[at] else "-" for at in CHECKPOINTS)
        gaps = []
        for at in CHECKPOINTS:
            if not reference[at]:
                gaps.append("-")
                continue
            gap = f"{mean[at] - reference[at]:+.3f}"
            if len(theirs_fits) > 1 and len(done) > 1:
                p = stats.ttest_ind(done[at], theirs_fits[at], equal_var=False).pvalue
                gap += f" (p {p:.2f})"
            gaps.append(gap)
        lines += [
            f"| {name} | paper mode ({len(done)}) | {ours} | {done.seconds.mean():.0f} |",
            f"| | published code ({n_theirs}) | {theirs} | |",
            f"| | difference | {' | '.join(gaps)} | |",
        ]
    return "\n".join(lines) + "\n"


def _published_fits(published: pd.DataFrame | None, name: str, seeds: list[int]) -> pd.DataFrame:
    if published is None or published.empty:
        return pd.DataFrame(columns=list(CHECKPOINTS))
    keep = (published.dataset == name) & published.seed.isin(seeds)
    return published[keep & (published.params == PUBLISHED_KEY)]


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
    parser.add_argument("--runs", type=int, default=3, help="fits on each mask")
    parser.add_argument(
        "--runs-for", action="append", default=[], help="NAME=N: N fits a mask of one dataset"
    )
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE, a setting")
    parser.add_argument("--cache", type=Path, help="CSV file keeping each fit's row")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = dict(_setting(s) for s in args.set)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs_for = {name: int(n) for name, _, n in (s.partition("=") for s in args.runs_for)}
    names = args.datasets.split(",")
    rows = pd.concat(
        [fits([name], seeds, runs_for.get(name, args.runs), settings, args.cache) for name in names]
    )
    shown = {name: n for name, n in runs_for.items() if name in names}
    text = report(rows, settings, seeds, args.runs, cached_rows(args.cache), args.cache, shown)
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
