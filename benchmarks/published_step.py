"""Paper mode's first steps beside the published TDM code's from the same start (issue 19).

Run: ``python -m benchmarks.published_step --code DIR [--datasets ...] [--steps 1,20]
[--write]``. ``DIR``
is a work tree of the published repository (hezgit/TDM at c75bc06) with FrEIA 0.2 importable.
On each reference mask of seed 0 (``benchmarks/reference/``) the published code's own ``TDM``
class runs ``steps`` steps in a fresh process (float64, one torch thread, its batch size rule,
``noise=0`` so that the cells start at the column means, its network built as its ``run_TDM``
builds it); its initial weights, the rows of every batch it drew and its result are handed to
:meth:`TDMImputer.paper` (``init_noise=0``, ``standardize=False``), which starts from those
weights and draws the same batches. Printed per dataset and number of steps: the largest and
mean difference of the missing cells, and the share of network weights within 1e-6 of the
published code's, once with FrEIA's clamp as it is (``0.636 * atan``) and once with its constant
set to ``2 / pi`` as paper mode's (``squash="unscaled"``), which leaves only rounding.
``--write`` puts the table in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import torch
from torch import nn

from benchmarks._report import replace_section
from benchmarks.paper_trajectory import LOADERS, MASKS
from tdm import TDMImputer

SECTION = "Paper mode's first steps beside the published code (same start)"

# Runs inside the fresh process: argv = dataset, steps, out file, masks dir, clamp constant.
_DRIVER = """
import importlib.util, math, sys
import numpy as np, torch
from torch import nn
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)  # as run_TDM's default tensor type
torch.autograd.set_detect_anomaly = lambda *args, **kwargs: None  # bit-identical, faster
import FrEIA.framework as Ff, FrEIA.modules as Fm
from sklearn import datasets
from sklearn.preprocessing import scale
spec = importlib.util.spec_from_file_location("published_tdm", "tdm.py")
published = importlib.util.module_from_spec(spec)
spec.loader.exec_module(published)
name, steps, out, masks, constant = sys.argv[1:6]
X = scale(getattr(datasets, "load_" + name)().data)
mask = np.load(f"{masks}/{name}_MCAR_p0.3_seed0.npy")
d = X.shape[1]
np.random.seed(0)
torch.manual_seed(0)
def subnet(dims_in, dims_out):
    return nn.Sequential(nn.Linear(dims_in, 2 * d), nn.SELU(), nn.Linear(2 * d, 2 * d), nn.SELU(),
                         nn.Linear(2 * d, dims_out))
projector = Ff.SequenceINN(d)
for _ in range(3):
    projector.append(Fm.RNVPCouplingBlock, subnet_constructor=subnet)
if constant == "pi":
    for block in projector.module_list:
        block.f_clamp = lambda u: (2 / math.pi) * torch.atan(u)
initial = {k: v.clone() for k, v in projector.state_dict().items()}
drawn, choice = [], np.random.choice
def recording_choice(*args, **kwargs):
    rows = choice(*args, **kwargs)
    drawn.append(rows.copy())
    return rows
np.random.choice = recording_choice
imputer = published.TDM(projector, batchsize=512, im_lr=1e-2, proj_lr=1e-2, niter=int(steps),
                        noise=0.0)
filled = imputer.fit_transform(torch.tensor(np.where(mask, np.nan, X)), verbose=False)
final = {k: v.clone() for k, v in projector.state_dict().items()}
torch.save({"initial": initial, "final": final, "drawn": np.stack(drawn),
            "filled": filled.detach().numpy(), "mask": mask, "X": X}, out)
"""

# Our conditioner for each update and the published block's subnet that plays its part.
_SUBNETS = {
    "first.net": "subnet_s2",
    "first.shift_net": "subnet_t2",
    "second.net": "subnet_s1",
    "second.shift_net": "subnet_t1",
}


def _ours_key_to_published(key: str) -> str:
    _, block, update, part, layer, kind = key.split(".")
    return f"module_list.{block}.{_SUBNETS[f'{update}.{part}']}.{layer}.{kind}"


class _Started(TDMImputer):
    """Paper mode starting from given network weights (the published code's)."""

    start_weights: dict[str, torch.Tensor]

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        network = super()._make_network(n_features, generator)
        state = {k: self.start_weights[_ours_key_to_published(k)] for k in network.state_dict()}
        network.load_state_dict(state)
        return network


def published_run(code: Path, name: str, steps: int, constant: str, out: Path) -> dict[str, Any]:
    """The published code's ``steps`` steps, in its own process; returns what it recorded."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    argv = [name, str(steps), str(out), str(MASKS), constant]
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, *argv], cwd=code, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"the published code failed on {name}:\n{done.stderr}")
    return dict(torch.load(out, weights_only=False))


def _replayed(drawn: np.ndarray) -> Iterator[np.ndarray]:
    for step in range(len(drawn) // 2):
        yield np.concatenate([drawn[2 * step], drawn[2 * step + 1]])


def compare(record: dict[str, Any]) -> dict[str, float]:
    """Paper mode from the published run's start, over its batches: how far apart they end."""
    mask, X, drawn = record["mask"], record["X"], record["drawn"]
    batches = _replayed(drawn)
    est = _Started(
        **{
            **TDMImputer.paper().get_params(),
            "init_noise": 0.0,
            "standardize": False,
            "max_iter": len(drawn) // 2,
            "device": "cpu",
            "random_state": 0,
        }
    )
    est.start_weights = record["initial"]
    with mock.patch("tdm._estimator.draw_batch_rows", lambda *args: next(batches)):
        filled = est.fit_transform(np.where(mask, np.nan, X))
    cells = np.abs(filled[mask] - record["filled"][mask])
    gaps = [
        (value - record["final"][_ours_key_to_published(key)]).abs().flatten()
        for key, value in est.network_.state_dict().items()
    ]
    weights = torch.cat(gaps)
    return {
        "cells max": float(cells.max()),
        "cells mean": float(cells.mean()),
        "weights within 1e-6": float((weights <= 1e-6).double().mean()),
        "weights max": float(weights.max()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="the published code's tree")
    parser.add_argument("--datasets", default=",".join(LOADERS))
    parser.add_argument("--steps", default="1,20")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.datasets.split(","):
            for steps in (int(s) for s in args.steps.split(",")):
                for constant in ("freia", "pi"):
                    out = Path(scratch) / f"{name}-{steps}-{constant}.pt"
                    record = published_run(args.code, name, steps, constant, out)
                    rows.append({"dataset": name, "steps": steps, "clamp constant": constant})
                    rows[-1].update(compare(record))
                    print(rows[-1], flush=True)
    text = "\n".join(
        [
            f"Command: `python -m benchmarks.published_step --code DIR --steps {args.steps} "
            "--write`  ",
            f"Date: {date.today().isoformat()}; machine: {platform.machine()}, torch "
            f"{torch.__version__}, 1 torch thread.  ",
            "The published code's `TDM` class and `TDMImputer.paper()` from the same network "
            "weights and cells (column means, no noise), over the same batches, on each "
            "dataset's reference mask of seed 0: largest and mean difference of the missing "
            "cells after that many steps, and the share of network weights within 1e-6 of the "
            "published code's (and the largest difference); clamp constant `freia` is FrEIA's "
            "0.636 as it is, `pi` the published run with it set to 2 / pi as paper mode's.",
            "",
            markdown(pd.DataFrame(rows)),
        ]
    )
    print(text)
    if args.write:
        replace_section(SECTION, text)


def markdown(table: pd.DataFrame) -> str:
    """``table`` as a Markdown table, numbers to three significant digits."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for row in table.itertuples(index=False):
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
