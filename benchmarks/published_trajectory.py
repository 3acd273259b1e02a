"""The published TDM code's MAE trajectory on the reference masks, run here (issue 19).

Run: ``python -m benchmarks.published_trajectory --code DIR [--datasets ...] [--seeds 0,1,2]
[--runs 3] [--cache FILE]``. ``DIR`` is a work tree of the published repository (hezgit/TDM at
c75bc06) with FrEIA 0.2 importable (on ``PYTHONPATH`` or installed); POT and torch are this
project's. Each fit is the published code's own ``run_TDM`` in a fresh process (it sets a global
default tensor type): ``niter=10000``, ``lr=1e-2``, ``network_width=2``, ``network_depth=3``, no
``batchsize`` key, one torch thread, NumPy's and torch's global RNGs seeded with
``1000 (r + 1) + seed`` for fit ``r`` before the call (``r = 0`` is the seeding of
``../shared/reference``). The MAE of the masked cells is read from its own record after 1,000,
2,000, 3,000, 5,000 and 6,000 steps and from its result after 10,000. Rows go to ``--cache`` as
:mod:`benchmarks.paper_trajectory` keeps its own (``params`` = ``"published"``), so that a fit
already there is not run again and the two modules' rows share one file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.paper_trajectory import CHECKPOINTS, LOADERS, MASKS, PUBLISHED_KEY, each_fit

# Runs inside the fresh process: argv = dataset, seed, random state, out dir. Only calls the
# published code's entry point; prints one JSON line of its MAE at each checkpoint.
_DRIVER = """
import json, sys
import numpy as np, torch
from sklearn import datasets
from sklearn.preprocessing import scale
torch.set_num_threads(1)
if sys.argv[7] == "off":  # a check only: its values are bit-identical, its time doubles
    torch.autograd.set_detect_anomaly = lambda *args, **kwargs: None
import run_tdm
name, seed, state, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
masks, checkpoints = sys.argv[5], json.loads(sys.argv[6])
X = scale(getattr(datasets, "load_" + name)().data)
mask = np.load(f"{masks}/{name}_MCAR_p0.3_seed{seed}.npy")
np.random.seed(state)
torch.manual_seed(state)
args = {"out_dir": out, "niter": max(checkpoints), "lr": 1e-2, "network_width": 2,
        "network_depth": 3, "report_interval": 1000}
run_tdm.run_TDM(np.where(mask, np.nan, X), args, X)
result = np.load(f"{out}/result.npy", allow_pickle=True).item()
row = {at: float(result["learning_MAEs"][at]) for at in checkpoints if at < max(checkpoints)}
row[max(checkpoints)] = float(result["MAE"])
print(json.dumps(row))
"""


def run_one(
    code: Path, name: str, seed: int, random_state: int, anomaly: bool = False
) -> dict[str, Any]:
    """One fit of the published code, in its own process: MAE at each checkpoint. Its autograd
    anomaly detection stays off unless ``anomaly`` (it only checks the backward pass: the values
    are bit-identical, measured over 300 steps on breast_cancer, at half the time)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        argv = [name, str(seed), str(random_state), out, str(MASKS), json.dumps(CHECKPOINTS)]
        argv.append("on" if anomaly else "off")
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, *argv],
            cwd=code,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the published code failed on {name} seed {seed}:\n{done.stderr}")
    maes = json.loads(done.stdout.strip().splitlines()[-1])
    row: dict[Any, Any] = {"dataset": name, "seed": seed, "random_state": random_state}
    row["params"], row["seconds"] = PUBLISHED_KEY, time.perf_counter() - started
    row.update({int(at): value for at, value in maes.items()})
    return row


def fits(
    code: Path,
    names: list[str],
    seeds: list[int],
    runs: int,
    cache: Path | None,
    anomaly: bool = False,
) -> pd.DataFrame:
    """``runs`` fits of the published code on each mask, read from ``cache`` where kept there."""
    return each_fit(
        names, seeds, runs, PUBLISHED_KEY, cache, lambda *fit: run_one(code, *fit, anomaly)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="the published code's tree")
    parser.add_argument("--datasets", default=",".join(LOADERS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--runs", type=int, default=1, help="fits on each mask")
    parser.add_argument("--cache", type=Path, help="CSV file keeping each fit's row")
    parser.add_argument("--anomaly", action="store_true", help="keep anomaly detection on")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = fits(args.code, args.datasets.split(","), seeds, args.runs, args.cache, args.anomaly)
    mean = rows.groupby("dataset")[list(CHECKPOINTS)].agg(["mean", "count"])
    print(mean.round(3).to_string())
    print(np.round(rows.groupby("dataset").seconds.mean(), 0).to_string())


if __name__ == "__main__":
    main()
