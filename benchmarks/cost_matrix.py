"""The exact solvers' cost matrix: differences against the centred float64 expansion, by width.

Run: ``python -m benchmarks.cost_matrix [--write]``. Two batches of 512 float32 points of
``d`` columns; the median of 50 timed calls after 5 warm-up calls, one torch thread, of
:func:`tdm.transport.pairwise_cost` (differences, in float32) and of the expansion
``|a|² + |b|² - 2ab`` on the points centred and in float64 (the path
:func:`tdm.transport.plan_cost` takes past :data:`tdm.transport.DIFFERENCE_MAX_WIDTH`
columns). It sets that width: the expansion is used where it is faster.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable
from datetime import date

import torch

import tdm.transport
from benchmarks._report import replace_section
from benchmarks.speed import median_ms
from tdm.transport import pairwise_cost, plan_cost

SECTION = "Cost matrix of the exact solvers"
WIDTHS = (4, 8, 12, 16, 20, 32, 41, 72, 128)


def timed_ms(call: Callable[[], object]) -> float:
    """Median ms of 50 calls after 5 warm-up calls."""
    for _ in range(4):
        call()
    return median_ms(call, 50)  # one more warm-up call, then the 50 timed ones


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    lines = [
        "Command: `python -m benchmarks.cost_matrix --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread, "
        f"torch {torch.__version__}.  ",
        "Two batches of 512 points; median ms of 50 calls. Differences: `pairwise_cost` in "
        "float32; expansion: centred, float64. `plan_cost` takes the expansion past "
        f"{tdm.transport.DIFFERENCE_MAX_WIDTH} columns.",
        "",
        "| columns | differences, ms | expansion, ms | ratio |",
        "|---|---|---|---|",
    ]
    saved = tdm.transport.DIFFERENCE_MAX_WIDTH
    try:
        tdm.transport.DIFFERENCE_MAX_WIDTH = 0  # plan_cost: the expansion at every width
        for d in WIDTHS:
            z1 = torch.randn(512, d, generator=generator)
            z2 = torch.randn(512, d, generator=generator)
            diff = timed_ms(lambda: pairwise_cost(z1, z2, "euclidean"))  # noqa: B023
            expansion = timed_ms(lambda: plan_cost(z1, z2, "euclidean"))  # noqa: B023
            lines.append(f"| {d} | {diff:.3f} | {expansion:.3f} | {diff / expansion:.2f} |")
    finally:
        tdm.transport.DIFFERENCE_MAX_WIDTH = saved
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
