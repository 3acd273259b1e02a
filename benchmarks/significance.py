"""Is the default's lead over the best other method significant? One row per dataset and
mechanism of the held-out grid.

Run: ``python -m benchmarks.significance [--results FILE ...] [--out FILE] [--selection-seeds
3,4,5]``. The best other method of a cell is the non-TDM method with the lowest mean MAE on the
selection seeds (3-5); the default and it are compared by a one-sided paired t-test over every
seed both ran. Only trials of each method's own settings at 30% missing count.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from scipy import stats

from benchmarks.datasets import DATASETS
from benchmarks.registry import METHODS
from benchmarks.report import latest_per_trial

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "heldout" / "benchmark.csv"
OUT = ROOT / "results" / "heldout" / "significance.md"
ALPHA = 0.05
P = 0.3
SELECTION_SEEDS = (3, 4, 5)
FULL = 5
#: The methods the default is compared with: every public method of the numeric grid but TDM's
#: own and the mixed-type ones.
BASELINES = tuple(
    m for m in METHODS if m not in {"tdm", "tdm_paper", "mode", "missforest_mixed", "miceforest"}
)
MECHANISMS = ("mcar", "mar", "mnarl", "mnarq")
#: The five datasets of fewer than 1,000 rows (:data:`DATASETS` lists the smallest first).
SMALL_TABLES = DATASETS[:5]


TRIAL_COLUMNS = ("dataset", "mechanism", "seed", "method", "p", "params", "mae", "tdm_version")
"""The columns of a trial the test reads."""


def read_trials(path: Path) -> pd.DataFrame:
    """The trials of a ``tdm bench`` report CSV or DuckDB results file; ``ValueError`` for a
    file that holds none (another CSV, a DuckDB file without ``bench_results``)."""
    if path.suffix == ".duckdb":
        with duckdb.connect(str(path), read_only=True) as con:
            try:
                return con.execute("SELECT * FROM bench_results").df()
            except duckdb.CatalogException:
                raise ValueError(f"{path} holds no bench_results table") from None
    trials = pd.read_csv(path)
    lacking = [name for name in TRIAL_COLUMNS if name not in trials.columns]
    if lacking:
        raise ValueError(f"{path} is not a tdm bench record: it lacks {', '.join(lacking)}")
    return trials


@dataclass(frozen=True)
class Cell:
    """The default against the best other method on one dataset and mechanism."""

    dataset: str
    mechanism: str
    best: str
    candidates: int  # the non-TDM methods that ran the cell, the best chosen among them
    seeds: tuple[int, ...]
    default_mae: np.ndarray
    best_mae: np.ndarray

    @property
    def difference(self) -> float:
        """Mean of default minus best over the paired seeds (negative: the default leads)."""
        return float(np.mean(self.default_mae - self.best_mae))

    def p_lower(self) -> float:
        """One-sided paired t-test p-value of H1: the default's MAE is lower."""
        diffs = self.default_mae - self.best_mae
        if len(diffs) < 2:
            return float("nan")
        if np.all(diffs == diffs[0]):
            return 0.0 if diffs[0] < 0 else 1.0
        return float(stats.ttest_rel(self.default_mae, self.best_mae, alternative="less").pvalue)

    def verdict(self) -> str:
        """``significant lead``, ``significantly behind`` or ``not significant (...)``."""
        p = self.p_lower()
        if self.difference == 0:
            return "tie"
        if self.difference < 0 and p < ALPHA:
            return "significant lead"
        if self.difference > 0 and 1.0 - p < ALPHA:
            return "significantly behind"
        return "not significant (" + ("lead" if self.difference < 0 else "behind") + ")"


def load(paths: Sequence[Path]) -> pd.DataFrame:
    """The default's and the baselines' trials of ``paths`` with their own settings at 30%
    missing, each in its newest library version; two different results for one trial and
    version are refused."""
    frames = []
    for path in paths:
        trials = read_trials(path)
        keep = trials["method"].isin([*BASELINES, "tdm"])
        keep &= (trials["p"] == P) & (trials["params"].astype(str) == "{}")
        frames.append(trials[keep])
    trials = pd.concat(frames, ignore_index=True)
    key = ["dataset", "mechanism", "seed", "method", "tdm_version"]
    trials = trials.drop_duplicates([*key, "mae"])
    clashes = trials[trials.duplicated(key, keep=False)]
    if not clashes.empty:
        first = clashes.iloc[0]
        raise ValueError(
            f"two different results for {first['method']} {first['tdm_version']} on "
            f"{first['dataset']}/{first['mechanism']}/seed {first['seed']} in "
            f"{[str(p) for p in paths]}"
        )
    return latest_per_trial(trials).reset_index(drop=True)


def cells(trials: pd.DataFrame, selection: Sequence[int] = SELECTION_SEEDS) -> list[Cell]:
    """One `Cell` per dataset and mechanism where the default and a baseline both ran, the
    best baseline chosen on the ``selection`` seeds."""
    out: list[Cell] = []
    for (dataset, mechanism), cell in trials.groupby(["dataset", "mechanism"], sort=True):
        by_method = {m: g.set_index("seed")["mae"] for m, g in cell.groupby("method")}
        if "tdm" not in by_method:
            continue
        incomplete = [m for m, mae in by_method.items() if not set(selection) <= set(mae.index)]
        if any(m != "tdm" for m in incomplete):
            raise ValueError(
                f"{dataset}/{mechanism}: {sorted(incomplete)} lack some of the selection seeds "
                f"{tuple(selection)}; the best other method is chosen on them (--selection-seeds)"
            )
        shared = [
            (float(mae.loc[list(selection)].mean()), method)
            for method, mae in by_method.items()
            if method != "tdm"
        ]
        if not shared:
            continue
        best = min(shared)[1]
        seeds = sorted(set(by_method["tdm"].index) & set(by_method[best].index))
        out.append(
            Cell(
                str(dataset),
                str(mechanism),
                best,
                len(shared),
                tuple(int(s) for s in seeds),
                by_method["tdm"].loc[seeds].to_numpy(float),
                by_method[best].loc[seeds].to_numpy(float),
            )
        )
    return out


#: The mechanisms whose trials time the methods: every method's trials there ran as one grid
#: (the default's MNAR trials were run again later, alone on the machine).
TIMED_MECHANISMS = ("mcar", "mar")


def grid_means(trials: pd.DataFrame, selection: Sequence[int] = SELECTION_SEEDS) -> pd.DataFrame:
    """Rows: each mechanism's mean MAE over its datasets (``selection`` seeds), then the median fit
    seconds of the :data:`TIMED_MECHANISMS` trials on the small tables and on the others;
    columns: the default and every baseline that ran all the cells of the default (``tdm``
    first)."""
    trials = trials[trials["seed"].isin(selection)]
    grid = set(map(tuple, trials.loc[trials["method"] == "tdm", ["dataset", "mechanism"]].values))
    ran = trials.groupby("method")[["dataset", "mechanism"]].apply(
        lambda g: set(map(tuple, g.values))
    )
    methods = ["tdm", *sorted(m for m in ran.index if m != "tdm" and grid <= ran[m])]
    per_cell = trials[trials["method"].isin(methods)].groupby(["mechanism", "dataset", "method"])
    mae = per_cell["mae"].mean().groupby(["mechanism", "method"]).mean().unstack("method")
    rows = {}
    for mechanism in MECHANISMS:
        if mechanism in mae.index:
            count = sum(m == mechanism for _, m in grid)
            rows[f"{mechanism.upper()} ({count} datasets)"] = mae.loc[mechanism]
    small = trials["dataset"].isin(SMALL_TABLES)
    timed = trials["mechanism"].isin(TIMED_MECHANISMS) & trials["method"].isin(methods)
    for label, part in (("small tables", small), ("large tables", ~small)):
        seconds = trials[part & timed].groupby("method")["fit_seconds"]
        rows[f"median fit s, {label}"] = seconds.median()
    return pd.DataFrame(rows).T[methods]


def report(
    found: Sequence[Cell],
    sources: Sequence[str],
    means: pd.DataFrame,
    selection: Sequence[int] = SELECTION_SEEDS,
) -> str:
    """The markdown tables and the per-mechanism counts."""
    chosen = _seeds_text(selection)
    lines = [
        "# Is the default's lead over the best other method significant?",
        "",
        "Written by `python -m benchmarks.significance` from "
        + ", ".join(f"`{s}`" for s in sources)
        + f". Held-out masks, 30% missing. Best other method: lowest mean MAE over {chosen} "
        "among the non-TDM methods that ran the cell (how many: *of*; chosen on seeds that the "
        "test then uses too, which can only favour the baseline). Test: paired t-test on the "
        "per-seed MAE differences over "
        f"every seed both ran (scipy `ttest_rel`), one-sided, alpha {ALPHA}.",
        "",
        "| dataset | mechanism | best other (of) | seeds | tdm MAE | best MAE | tdm - best "
        "| p (tdm lower) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in found:
        seeds = ",".join(map(str, c.seeds)) + ("" if len(c.seeds) >= FULL else " (short)")
        lines.append(
            f"| {c.dataset} | {c.mechanism} | {c.best} ({c.candidates}) | {seeds} "
            f"| {c.default_mae.mean():.4f} "
            f"| {c.best_mae.mean():.4f} | {c.difference:+.4f} | {c.p_lower():.3f} "
            f"| {c.verdict()} |"
        )
    lines.append("")
    for mechanism in MECHANISMS:
        group = [c for c in found if c.mechanism == mechanism]
        if not group:
            continue
        full = [c for c in group if len(c.seeds) >= FULL]
        wins = sum(c.verdict() == "significant lead" for c in full)
        behind = sum(c.verdict() == "significantly behind" for c in full)
        lines.append(
            f"- {mechanism.upper()}: {len(group)} datasets, {len(full)} with {FULL} paired "
            f"seeds; of those, a significant lead on {wins}, significantly behind on {behind}."
        )
    lines += [
        "",
        "## Over the grid",
        "",
        f"Mean over each mechanism's datasets of the mean MAE on {chosen}, for the methods that "
        f"ran every cell; median fit seconds over their MCAR and MAR trials on {chosen} (small "
        "tables: " + ", ".join(SMALL_TABLES) + "; measured on 2 shared cores, so indicative only).",
        "",
        "| | " + " | ".join(means.columns) + " |",
        "|---|" + "---|" * len(means.columns),
    ]
    for label, row in means.iterrows():
        digits = 3 if str(label).endswith("datasets)") else 1
        lines.append(f"| {label} | " + " | ".join(f"{v:.{digits}f}" for v in row) + " |")
    return "\n".join(lines) + "\n"


def _seeds_text(seeds: Sequence[int]) -> str:
    """ "seeds 3-5" for a run of consecutive seeds, else "seeds 0, 2, 7"."""
    ordered = sorted(seeds)
    consecutive = len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1))
    return (
        f"seeds {ordered[0]}-{ordered[-1]}"
        if consecutive
        else f"seeds {', '.join(map(str, ordered))}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, nargs="+", default=[RESULTS])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--selection-seeds",
        type=lambda text: tuple(int(s) for s in text.split(",") if s),
        default=SELECTION_SEEDS,
        help="seeds on which the best other method is chosen (default: 3,4,5)",
    )
    args = parser.parse_args(argv)
    for path in args.results:
        if not path.is_file():
            parser.error(f"--results {path} does not exist")
    try:
        trials = load(args.results)
    except ValueError as error:  # a file that is no record, or two records that disagree
        parser.error(str(error))
    sources = []
    for path in args.results:
        try:
            sources.append(str(path.resolve().relative_to(ROOT)))
        except ValueError:
            sources.append(str(path))
    if not args.selection_seeds:
        parser.error("--selection-seeds names no seed")
    try:
        found = cells(trials, args.selection_seeds)
    except ValueError as error:  # a baseline that lacks a selection seed
        parser.error(str(error))
    if not found:
        parser.error(
            "no dataset and mechanism where tdm and a baseline both ran with their own settings "
            f"at {P:.0%} missing (trials run with --max-iter or other settings do not count)"
        )
    text = report(found, sources, grid_means(trials, args.selection_seeds), args.selection_seeds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
