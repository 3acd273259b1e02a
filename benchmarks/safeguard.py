"""Whether the safeguard's probe cells rank the start and the refinement as the truth does, and
what the default (large forest start, safeguard) costs and buys on the large tables (issue 17).

Run: ``python -m benchmarks.safeguard --datasets letter --seeds 0,1 --mechanisms mcar,mar`` (one
process per dataset may run beside another: each writes ``results/safeguard/<dataset>.csv``,
resuming), then ``python -m benchmarks.safeguard --write`` to put every recorded row in
BENCHMARKS.md. Selection masks only (30% missing, seeds 0-1). Each fit is the default
(``init="auto"``): every share the safeguard weighs, scored on the probe cells as the safeguard
sees it (from the probe run's start to the refinement), and on the masked cells (the truth)
both as the fit returns it (from the anchor to the refinement) and from the probe run's start;
the share it chose, and the fit's wall time, one torch thread.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from benchmarks._report import replace_section
from tdm import TDMImputer
from tdm._safeguard import share_of
from tdm.datasets import load_dataset
from tdm.simulate import simulate

SECTION = "Safeguard on the large tables (selection masks)"
OUT = Path(__file__).resolve().parent.parent / "results" / "safeguard"
COLUMNS = [
    "dataset",
    "mechanism",
    "seed",
    "init",
    "trees",
    "rounds",
    "share",
    "probe_mae",
    "true_mae",
    "blind_mae",
    "chosen",
    "seconds",
]


class _Candidates(TDMImputer):
    """The default TDM, keeping the start and the refinement the safeguard chose between."""

    def _guarded(self, refined: np.ndarray, starts: Any, probe: Any, Z: np.ndarray) -> Any:
        self.candidates_ = (*starts, refined)
        return super()._guarded(refined, starts, probe, Z)


def run_one(name: str, mechanism: str, seed: int) -> list[tuple[Any, ...]]:
    """One default fit: every share's probe and true MAE (standardised units), the chosen one."""
    X = load_dataset(name).X
    mask = simulate(X, mechanism, p=0.3, random_state=seed)  # type: ignore[arg-type]
    est = _Candidates(random_state=seed)
    started = time.perf_counter()
    est.fit(np.where(mask, np.nan, X))
    seconds = time.perf_counter() - started
    if est.safeguard_scores_ is None:
        raise SystemExit(f"{name}: not a large table, the safeguard does not run there")
    initial, anchor, refined = est.candidates_
    trees, rounds, *_ = est.forest_size_ or (0, 0)

    def true_mae(start: np.ndarray, share: float) -> float:
        values = share_of(start, refined, share, len(est.encoding_.numeric))
        return float(np.abs((values * est.scale_ + est.mean_)[mask] - X[mask]).mean())

    rows: list[tuple[Any, ...]] = []
    for share, probe_mae in est.safeguard_scores_.items():
        fit = (name, mechanism, seed, est.init_, trees, rounds, share, probe_mae)
        outcome = (true_mae(anchor, share), true_mae(initial, share), share == est.refined_share_)
        rows.append((*fit, *outcome, seconds))
    return rows


def run(name: str, mechanisms: list[str], seeds: list[int]) -> None:
    path = OUT / f"{name}.csv"
    done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=COLUMNS)
    for mechanism in mechanisms:
        for seed in seeds:
            if ((done.mechanism == mechanism) & (done.seed == seed)).any():
                continue
            rows = run_one(name, mechanism, seed)
            print(rows, file=sys.stderr, flush=True)
            done = pd.concat([done, pd.DataFrame(rows, columns=COLUMNS)], ignore_index=True)
            done.to_csv(path, index=False)


def report() -> str:
    rows = pd.concat([pd.read_csv(p) for p in sorted(OUT.glob("*.csv"))], ignore_index=True)
    fits = rows.groupby(["dataset", "mechanism", "seed"], sort=True)
    lines = [
        "Command: `python -m benchmarks.safeguard --datasets NAME --seeds 0,1 --mechanisms "
        "mcar,mar` per dataset, then `python -m benchmarks.safeguard --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread, "
        "beside one or two other single-threaded processes on 2 cores (MissForest grid runs, "
        "tests).  ",
        'One default fit per row (`init="auto"`, large forest start, safeguard on). MAE '
        "(standardised units) on the masked cells (the truth) of what the fit may return: the "
        "start computed with every observed cell (share 0, the anchor), the refinement (share "
        "1) and the shares between; the share the probe cells chose (scoring the shares from "
        "the probe run's start, blind to them) and its true MAE; how far the choice is from "
        "the best share in hindsight; what the same share of the way from the probe run's start "
        "would give (tdm 0.9's safeguard, which moved from that start); fit seconds.",
        "",
        "| dataset | mechanism | seed | start | forest | start (0) | 0.25 | 0.5 | 0.75 | "
        "refined (1) | chosen | chosen MAE | regret | from the probe run's start | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    probe_gain, true_gain = [], []
    for (name, mechanism, seed), fit in fits:
        fit = fit.sort_values("share")
        true = dict(zip(fit.share, fit.true_mae, strict=True))
        probe = dict(zip(fit.share, fit.probe_mae, strict=True))
        blind = dict(zip(fit.share, fit.blind_mae, strict=True))
        chosen = fit[fit.chosen.astype(bool)].iloc[0]
        first = fit.iloc[0]
        forest = f"{first.trees}x{first.rounds}" if first.trees else "-"
        cells = " | ".join(f"{true[s]:.4f}" for s in sorted(true))
        lines.append(
            f"| {name} | {mechanism} | {seed} | {first.init} | {forest} | {cells} | "
            f"{chosen.share:g} | {chosen.true_mae:.4f} | "
            f"{chosen.true_mae - min(true.values()):.4f} | {chosen.blind_mae:.4f} | "
            f"{first.seconds:.0f} |"
        )
        probe_gain.append(probe[0.0] - probe[1.0])
        true_gain.append(blind[0.0] - blind[1.0])
    pg, tg = np.asarray(probe_gain), np.asarray(true_gain)
    agree = int((np.sign(pg) == np.sign(tg)).sum())
    corr = float(np.corrcoef(pg, tg)[0, 1]) if len(pg) > 2 else float("nan")
    lines += [
        "",
        f"The refinement's gain over the probe run's start (start MAE - refined MAE) on the "
        f"probe cells has the sign of its true gain (masked cells) in {agree} of {len(pg)} "
        f"fits; correlation {corr:.2f}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="", help="comma-separated; runs and records them")
    parser.add_argument("--mechanisms", default="mcar,mar")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in filter(None, args.datasets.split(",")):
        run(name, args.mechanisms.split(","), seeds)
    text = report()
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
