"""Paper mode with the published code's arithmetic in its step, on the reference masks (issue 19).

Two details of the published code's step that paper mode computes otherwise, both swapped in for
the fits this module runs (and restored after each):

- the transport loss is POT's ``ot.emd2`` on ``torch.cdist``'s distance matrix, its gradient
  the network simplex's plan through ``cdist``'s matrix-product expansion (paper mode: LAPJV on
  rounded costs, the gradient through the matched pairs' differences);
- the coupling's log-scale is ``clamp * 0.636 * atan(raw)``, FrEIA's rounded constant (paper
  mode: ``2 / π``).

Everything else is :meth:`TDMImputer.paper`, as :mod:`benchmarks.paper_trajectory` fits it. If
these fits end where the published code's do and paper mode's do not, one of the two matters.

Run: ``python -m benchmarks.published_arithmetic [--datasets breast_cancer] [--seeds 1]
[--runs 10] [--cache FILE]``; rows go to ``--cache`` beside paper mode's and the published
code's (``params`` = :data:`KEY`), and the printed table sets the three side by side.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ot
import pandas as pd
import torch
from torch import Tensor

import tdm.coupling
from benchmarks import paper_trajectory as trajectory
from tdm import TDMImputer
from tdm.transport import TransportTerms

#: FrEIA 0.2's ``ATAN`` clamp activation: ``0.636 * atan(u)``, 2 / π rounded.
FREIA_CONSTANT = 0.636
#: The ``params`` of this module's rows in a cache.
KEY = "published-arithmetic " + trajectory.fit_key({})


def freia_log_scale(raw: Tensor, clamp: float, squash: str = "scaled") -> Tensor:
    """FrEIA's RealNVP log-scale, ``clamp * 0.636 * atan(raw)`` (paper mode's squash only)."""
    if squash != "unscaled":
        raise ValueError("the published arithmetic is defined for paper mode's squash='unscaled'")
    return clamp * FREIA_CONSTANT * torch.atan(raw)


def emd2_on_cdist(self: TDMImputer, z1: Tensor, z2: Tensor) -> TransportTerms:
    """The published step's loss: ``ot.emd2`` between uniform weights on ``cdist(z1, z2)``."""
    costs = torch.cdist(z1, z2, p=2)
    a = torch.full((z1.shape[0],), 1.0 / z1.shape[0], dtype=z1.dtype, device=z1.device)
    b = torch.full((z2.shape[0],), 1.0 / z2.shape[0], dtype=z2.dtype, device=z2.device)
    return TransportTerms(ot.emd2(a, b, costs), costs.detach().mean())


@contextlib.contextmanager
def published_arithmetic() -> Iterator[None]:
    """Within the block, paper mode's step computes its loss and log-scales as the published
    code does; the library's own functions are back after it, whatever happens inside."""
    log_scale, loss = tdm.coupling.bounded_log_scale, TDMImputer._loss
    tdm.coupling.bounded_log_scale = freia_log_scale
    TDMImputer._loss = emd2_on_cdist  # type: ignore[method-assign]
    try:
        yield
    finally:
        tdm.coupling.bounded_log_scale = log_scale
        TDMImputer._loss = loss  # type: ignore[method-assign]


def run_one(name: str, seed: int, random_state: int) -> dict[str, Any]:
    with published_arithmetic():
        row = trajectory.run_one(name, seed, random_state, settings={})
    return {**row, "params": KEY}


def compare(rows: pd.DataFrame, names: list[str], seeds: list[int]) -> str:
    """Markdown: mean MAE (sample std) at each checkpoint of this module's fits, paper mode's and
    the published code's kept in ``rows`` (a cache), on the same datasets and masks."""
    arms = {
        "published arithmetic": KEY,
        "paper mode": trajectory.fit_key({}),
        "published code": trajectory.PUBLISHED_KEY,
    }
    header = " | ".join(f"{at:,}" for at in trajectory.CHECKPOINTS)
    lines = [f"| dataset | fits | {header} |", "|---|---|" + "---|" * len(trajectory.CHECKPOINTS)]
    for name in names:
        for label, key in arms.items():
            done = rows[(rows.dataset == name) & rows.seed.isin(seeds) & (rows.params == key)]
            if done.empty:
                continue
            cells = " | ".join(
                f"{done[at].mean():.3f} (± {done[at].std():.3f})" for at in trajectory.CHECKPOINTS
            )
            lines.append(f"| {name} | {label} ({len(done)}) | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="breast_cancer")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--runs", type=int, default=10, help="fits on each mask")
    parser.add_argument("--cache", type=Path, help="CSV file keeping each fit's row")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names, seeds = args.datasets.split(","), [int(s) for s in args.seeds.split(",")]
    fitted = trajectory.each_fit(names, seeds, args.runs, KEY, args.cache, run_one)
    print(compare(trajectory.cached_rows(args.cache) if args.cache else fitted, names, seeds))


if __name__ == "__main__":
    main()
