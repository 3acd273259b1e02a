"""Issue 17's held-out verdict: the default against MissForest and against its own start.

Run: ``python -m benchmarks.heldout_grid [--results results/issue17/benchmark.csv]
[--out results/issue17/paired.md]``. Reads the committed record of the grid's trials (a
``tdm bench`` report CSV, or its DuckDB results file), pairs trials by dataset, mechanism and
seed, and writes one markdown table per comparison:

- ``tdm`` against ``missforest``: mean MAE of each, the mean paired difference, and a paired
  t-test on the per-seed differences. The default is *worse by more than the paired noise* when
  its mean is higher and the one-sided p-value (H1: the default's MAE is higher) is below 0.05;
  *strictly better* when its mean MAE is lower. Mean fit seconds of each, one torch thread.
- ``tdm`` against ``tdm_start`` (the same fit stopped before its first step): mean MAE of each,
  and on how many seeds the default is above its start.

Only seeds where both methods of a comparison ran count; the number of pairs is in each row.
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

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "issue17" / "benchmark.csv"
OUT = ROOT / "results" / "issue17" / "paired.md"
ALPHA = 0.05
MECHANISMS = ("mcar", "mar")


@dataclass(frozen=True)
class Pairing:
    """Two methods' MAE and fit seconds on the seeds where both ran, for one grid cell."""

    dataset: str
    mechanism: str
    seeds: tuple[int, ...]
    mae_a: np.ndarray
    mae_b: np.ndarray
    seconds_a: np.ndarray
    seconds_b: np.ndarray

    @property
    def difference(self) -> float:
        """Mean of ``a - b`` over the paired seeds."""
        return float(np.mean(self.mae_a - self.mae_b))

    def p_worse(self) -> float:
        """One-sided paired t-test p-value of H1: ``a``'s MAE is higher than ``b``'s."""
        if len(self.seeds) < 2:
            return float("nan")
        diffs = self.mae_a - self.mae_b
        if np.all(diffs == diffs[0]):  # no spread: the test is undefined, the sign is certain
            return 0.0 if diffs[0] > 0 else 1.0
        return float(stats.ttest_rel(self.mae_a, self.mae_b, alternative="greater").pvalue)

    def worse(self) -> bool:
        """``a``'s mean MAE is higher, by more than the paired noise (one-sided p < ALPHA)."""
        return self.difference > 0 and self.p_worse() < ALPHA

    def p_two_sided(self) -> float:
        """Two-sided paired t-test p-value of ``a`` and ``b`` differing."""
        if len(self.seeds) < 2 or np.all(self.mae_a == self.mae_b):
            return float("nan")
        return float(stats.ttest_rel(self.mae_a, self.mae_b).pvalue)


def read_trials(path: Path) -> pd.DataFrame:
    """The trials of a ``tdm bench`` report CSV or DuckDB results file."""
    if path.suffix == ".duckdb":
        with duckdb.connect(str(path), read_only=True) as con:
            return con.execute("SELECT * FROM bench_results").df()
    return pd.read_csv(path)


def pair(trials: pd.DataFrame, a: str, b: str) -> list[Pairing]:
    """One `Pairing` of methods ``a`` and ``b`` per (dataset, mechanism) where both ran."""
    keep = trials[trials["mechanism"].isin(MECHANISMS)]
    out: list[Pairing] = []
    for (dataset, mechanism), cell in keep.groupby(["dataset", "mechanism"], sort=True):
        left = cell[cell["method"] == a].set_index("seed")
        right = cell[cell["method"] == b].set_index("seed")
        seeds = sorted(set(left.index) & set(right.index))
        if not seeds:
            continue
        out.append(
            Pairing(
                str(dataset),
                str(mechanism),
                tuple(int(s) for s in seeds),
                left.loc[seeds, "mae"].to_numpy(float),
                right.loc[seeds, "mae"].to_numpy(float),
                left.loc[seeds, "fit_seconds"].to_numpy(float),
                right.loc[seeds, "fit_seconds"].to_numpy(float),
            )
        )
    return out


def _against_missforest(pairs: Sequence[Pairing]) -> str:
    lines = [
        "| dataset | mechanism | pairs | tdm MAE | MissForest MAE | tdm - MF | p (tdm worse) "
        "| p (two-sided) | verdict | tdm fit s | MF fit s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        verdict = "worse" if p.worse() else ("better" if p.difference < 0 else "not worse")
        lines.append(
            f"| {p.dataset} | {p.mechanism} | {len(p.seeds)} | {p.mae_a.mean():.4f} "
            f"| {p.mae_b.mean():.4f} | {p.difference:+.4f} | {p.p_worse():.3f} "
            f"| {p.p_two_sided():.3f} | {verdict} | {p.seconds_a.mean():.1f} "
            f"| {p.seconds_b.mean():.1f} |"
        )
    lines.append("")
    for mechanism in MECHANISMS:
        cells = [p for p in pairs if p.mechanism == mechanism]
        better = sum(p.difference < 0 for p in cells)
        worse = sum(p.worse() for p in cells)
        lines.append(
            f"- {mechanism.upper()}: tdm's mean MAE lower on {better} of {len(cells)} datasets; "
            f"worse by more than the paired noise (one-sided p < {ALPHA}) on {worse}."
        )
    return "\n".join(lines)


def _against_start(pairs: Sequence[Pairing]) -> str:
    lines = [
        "| dataset | mechanism | pairs | start alone MAE | default MAE | default - start "
        "| seeds where the default is above its start |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        above = int(np.sum(p.mae_a > p.mae_b))
        lines.append(
            f"| {p.dataset} | {p.mechanism} | {len(p.seeds)} | {p.mae_b.mean():.4f} "
            f"| {p.mae_a.mean():.4f} | {p.difference:+.4f} | {above} |"
        )
    cells = sum(p.difference > 0 for p in pairs)
    trials = sum(int(np.sum(p.mae_a > p.mae_b)) for p in pairs)
    total = sum(len(p.seeds) for p in pairs)
    lines += [
        "",
        f"- The default's mean MAE is above its start's on {cells} of {len(pairs)} cells, "
        f"and on {trials} of {total} paired trials.",
    ]
    return "\n".join(lines)


def report(trials: pd.DataFrame, source: str) -> str:
    """The markdown report of both comparisons."""
    return (
        "# Issue 17's grid: the default against MissForest and against its own start\n\n"
        f"Written by `python -m benchmarks.heldout_grid` from `{source}`; held-out masks, 30% "
        "missing, trials paired by seed. Test: paired t-test on the per-seed MAE differences "
        f"(scipy `ttest_rel`); *worse* means a higher mean and one-sided p < {ALPHA}.\n\n"
        "## Default (`tdm`) against MissForest\n\n"
        f"{_against_missforest(pair(trials, 'tdm', 'missforest'))}\n\n"
        "## Start alone (`tdm_start`) against the default (`tdm`)\n\n"
        f"{_against_start(pair(trials, 'tdm', 'tdm_start'))}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        source = args.results.resolve().relative_to(ROOT)
    except ValueError:
        source = args.results
    text = report(read_trials(args.results), str(source))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
