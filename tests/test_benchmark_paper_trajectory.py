"""The paper-trajectory benchmark's fit cache and its comparison with the published code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchmarks.paper_trajectory import (
    CHECKPOINTS,
    PUBLISHED,
    PUBLISHED_KEY,
    each_fit,
    fit_key,
    main,
    report,
)


def _row(name: str, seed: int, state: int, params: str, base: float) -> dict[Any, Any]:
    row: dict[Any, Any] = {"dataset": name, "seed": seed, "random_state": state}
    row.update({"params": params, "seconds": 1.0})
    row.update({at: base + i / 100 for i, at in enumerate(CHECKPOINTS)})
    return row


def test_each_fit_runs_a_fit_once_and_reads_it_back_from_the_cache(tmp_path: Path) -> None:
    cache, calls = tmp_path / "fits.csv", []

    def run(name: str, seed: int, state: int) -> dict[Any, Any]:
        calls.append((name, seed, state))
        return _row(name, seed, state, "key", 0.5 + seed / 10)

    first = each_fit(["wine"], [0, 1], 2, "key", cache, run)
    assert calls == [("wine", 0, 1000), ("wine", 0, 2000), ("wine", 1, 1001), ("wine", 1, 2001)]
    again = each_fit(["wine"], [0, 1], 3, "key", cache, run)
    assert calls[4:] == [("wine", 0, 3000), ("wine", 1, 3001)]  # only the new fits ran
    assert again[list(CHECKPOINTS)].iloc[:2].to_numpy().tolist() == (
        first[list(CHECKPOINTS)].iloc[:2].to_numpy().tolist()
    )
    each_fit(["wine"], [0], 1, "other", cache, run)  # another key is another fit
    assert calls[-1] == ("wine", 0, 1000) and len(calls) == 7


def test_report_takes_the_published_fits_kept_and_tests_the_difference() -> None:
    ours = pd.DataFrame([_row("wine", s, 1000 + s, "key", 0.60 + s / 50) for s in range(3)])
    theirs = pd.DataFrame(
        [_row("wine", s, 1000 + s, PUBLISHED_KEY, 0.70 + s / 50) for s in range(3)]
    )
    text = report(ours, {}, [0, 1, 2], 1, theirs)
    line = next(li for li in text.splitlines() if li.startswith("| | difference"))
    assert "-0.100 (p 0.00)" in line  # 0.1 apart, spread 0.02: Welch's test rejects
    assert "published code (3)" in text
    fallback = report(ours, {}, [0, 1, 2], 1, None)
    assert f"{PUBLISHED['wine'][5000]:.3f}" in fallback and "(p " not in fallback


def test_one_dataset_may_have_more_fits_a_mask_than_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--runs-for NAME=N`: N fits a mask of that dataset, `--runs` of the others; all read
    from the cache here, so that nothing is fitted."""
    key, cache = fit_key({}), tmp_path / "fits.csv"
    rows = [_row("wine", 0, 1000, key, 0.6)]
    rows += [_row("breast_cancer", 0, 1000 * (r + 1), key, 0.5 + r / 10) for r in range(3)]
    pd.DataFrame(rows).to_csv(cache, index=False)
    argv = ["--datasets", "wine,breast_cancer", "--seeds", "0", "--runs", "1"]
    main([*argv, "--runs-for", "breast_cancer=3", "--cache", str(cache)])
    text = capsys.readouterr().out
    assert "paper mode (1)" in text and "paper mode (3)" in text
    assert "--runs 1 --write --runs-for breast_cancer=3" in text
    assert "1 fits on each of the published code's 30% MCAR masks (breast_cancer: 3)" in text
