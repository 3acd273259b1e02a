"""The training plot of a run: the relative transport cost of every step, and the raw loss.

TDM's latent space contracts as its network learns, so the raw loss falls by orders of magnitude
whether or not the two batches of a step match any better. The plot's main panel shows a
scale-free measure instead: each step's transport cost divided by the mean cost of all pairs
across its two batches (recorded by the library as `cost_ratio_history_`): 1 when the matching
is no better than pairing the rows at random, lower the more alike the batches are. A step whose
latent space jumps in scale leaves that ratio unchanged, so a smaller panel below shows the raw
loss, where such a spike shows. Both are on log scales, drawn in bins as each bin's median with
its minimum-maximum band, so that a single step's spike stays visible; spikes are also marked.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tasks.artifacts.markdown import code_span, format_number, png_image

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "MAX_LOSS_POINTS",
    "RATIO_MEANING",
    "SPIKE_FACTOR",
    "SPIKE_WINDOW",
    "LossCurve",
    "Panel",
    "Spikes",
    "downsample_loss",
    "find_spikes",
    "loss_plot_markdown",
    "loss_plot_png",
]

#: Points drawn of a curve: longer histories are summarised in this many bins.
MAX_LOSS_POINTS = 300
#: A step above this many times the median of the steps before it is a spike.
SPIKE_FACTOR = 10.0
#: How many steps before a step its median is taken over (earlier steps are not judged).
SPIKE_WINDOW = 50
#: What the main panel shows, in one sentence (printed under the plot).
RATIO_MEANING = (
    "Relative transport cost (top): each step's optimal-transport cost between its two batches "
    "of rows in TDM's latent space, divided by the mean cost of all pairs across the two "
    "batches; 1 means the matching is no better than pairing the rows at random, and the lower "
    "the curve, the more alike the batches."
)
LOSS_MEANING = (
    "Training loss: each step's optimal-transport cost between its two batches of rows, which "
    "also falls as TDM's latent space contracts (a jump in that scale shows as a spike)."
)


@dataclass(frozen=True, eq=False)
class LossCurve:
    """A per-step history cut to at most `MAX_LOSS_POINTS` bins of consecutive iterations.

    `iteration` is each bin's middle iteration (1-based), `median`, `low` and `high` the median,
    minimum and maximum value in it. Only finite positive values are drawn (a log scale):
    `n_iter` counts every step, `n_left_out` those left out.
    """

    iteration: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_iter: int
    n_left_out: int


@dataclass(frozen=True, eq=False)
class Spikes:
    """Steps far above the steps before them: `steps` (0-based), their `values`, and how many
    times the median of the `SPIKE_WINDOW` steps before it each one is (`times`)."""

    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray


@dataclass(frozen=True, eq=False)
class Panel:
    """One panel of the plot: a binned history, its spikes, the y label and, optionally, a
    dashed reference line with its label."""

    curve: LossCurve
    spikes: Spikes
    ylabel: str
    reference: tuple[float, str] | None = None


def downsample_loss(values: np.ndarray, max_points: int = MAX_LOSS_POINTS) -> LossCurve:
    """Summarise a history of shape (n_iter,) in at most `max_points` equal bins."""
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    history = np.asarray(values, dtype=float).ravel()
    kept = np.isfinite(history) & (history > 0)
    iterations = np.arange(1, history.size + 1, dtype=float)[kept]
    history = history[kept]
    n_bins = min(max_points, history.size)
    bins = np.array_split(np.arange(history.size), n_bins) if n_bins else []
    return LossCurve(
        iteration=np.array([iterations[b].mean() for b in bins]),
        median=np.array([np.median(history[b]) for b in bins]),
        low=np.array([history[b].min() for b in bins]),
        high=np.array([history[b].max() for b in bins]),
        n_iter=int(kept.size),
        n_left_out=int(kept.size - kept.sum()),
    )


def find_spikes(
    values: np.ndarray, factor: float = SPIKE_FACTOR, window: int = SPIKE_WINDOW
) -> Spikes:
    """The steps above `factor` times the median of the `window` steps before them.

    The first `window` steps are not judged (a fit's first steps fall fast: no spike). Non-finite
    values are left out, of the spikes and of the medians.
    """
    history = np.asarray(values, dtype=float).ravel()
    finite = np.flatnonzero(np.isfinite(history))
    kept = history[finite]
    if window < 1 or kept.size <= window:
        empty = np.empty(0)
        return Spikes(steps=np.empty(0, dtype=np.int64), values=empty, times=empty)
    before = np.median(np.lib.stride_tricks.sliding_window_view(kept[:-1], window), axis=1)
    judged = kept[window:]
    spiking = np.flatnonzero((before > 0) & (judged > factor * before))
    return Spikes(
        steps=finite[window + spiking],
        values=judged[spiking],
        times=judged[spiking] / before[spiking],
    )


def loss_plot_png(panels: Sequence[Panel], *, title: str) -> bytes:
    """A PNG, 640 pixels wide, of the panels stacked over a shared iteration axis (the first
    twice as tall as the others), each on a log scale: each bin's median, its min-max band
    shaded, spikes marked, and the reference line dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ratios = [2.0] + [1.0] * (len(panels) - 1)
    figure = Figure(figsize=(8.0, 1.2 + 1.0 * sum(ratios)), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)  # no pyplot: nothing global is touched
    grid = figure.add_gridspec(len(panels), 1, height_ratios=ratios)
    first = None
    for row, panel in enumerate(panels):
        axes = figure.add_subplot(grid[row], sharex=first)
        first = first or axes
        _draw(axes, panel)
        if row == 0:
            axes.set_title(title, parse_math=False)  # a table may be named "a$_$"
        if row < len(panels) - 1:
            axes.tick_params(labelbottom=False)
        else:
            axes.set_xlabel("iteration")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})  # reproducible bytes
    return buffer.getvalue()


def _draw(axes: Axes, panel: Panel) -> None:
    curve = panel.curve
    axes.set_ylabel(panel.ylabel, fontsize=9)
    axes.grid(alpha=0.3, which="major")
    if not curve.iteration.size:
        return
    axes.fill_between(
        curve.iteration, curve.low, curve.high, alpha=0.3, linewidth=0, label="min-max"
    )
    axes.plot(curve.iteration, curve.median, linewidth=1.5, label="median")
    if panel.spikes.steps.size:
        x, y = panel.spikes.steps + 1.0, panel.spikes.values
        axes.plot(x, y, "v", color="C3", markersize=5, label="spike")
    axes.set_yscale("log")
    if panel.reference is not None:
        level, label = panel.reference
        axes.axhline(level, color="0.4", linestyle="--", linewidth=1)
        axes.annotate(
            label,
            (0.005, level),
            xycoords=("axes fraction", "data"),
            textcoords="offset points",
            xytext=(0, -11),
            fontsize=8,
            color="0.3",
        )
    _plain_log_ticks(axes)  # after the reference line, which may widen the limits
    axes.legend(loc="upper right", fontsize=8, ncols=3, frameon=False)


def _plain_log_ticks(axes: Axes) -> None:
    """Ticks at the powers of ten in view, or at 1, 2 and 5 times them (1, 2, 3 and 5 times)
    where those are too few, labelled as plain numbers (0.2, not 2 x 10^-1); minor ticks
    unlabelled."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    low, high = axes.get_ylim()
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for steps in ((1,), (1, 2, 5), (1, 2, 3, 5)):
        ticks = [m * 10.0**e for e in decades for m in steps if low <= m * 10.0**e <= high]
        if len(ticks) >= 3:
            break
    axes.yaxis.set_major_locator(FixedLocator(ticks))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(NullFormatter())


def loss_plot_markdown(loss: np.ndarray, table: str, cost_ratio: np.ndarray | None = None) -> str:
    """Markdown with the training plot of `table` as an embedded PNG, what it shows, and a
    summary: the relative transport cost `cost_ratio` over the raw `loss` where the ratio was
    recorded (finite somewhere), else the raw loss alone."""
    losses = np.asarray(loss, dtype=float).ravel()
    ratios = np.asarray(cost_ratio if cost_ratio is not None else [], dtype=float).ravel()
    scale_free = bool(np.isfinite(ratios).any())
    measure = "relative transport cost" if scale_free else "training loss"
    lines = [f"# Training of {code_span(table)}: {measure}", ""]
    loss_curve = downsample_loss(losses)
    if not (scale_free or loss_curve.iteration.size):
        lines.append("No loss was recorded in this run (no fit, or no finite loss).")
        return "\n".join(lines)
    histories = [losses]
    panels = [Panel(loss_curve, find_spikes(losses), "training loss")]
    if scale_free:
        histories.insert(0, ratios)
        ratio_panel = Panel(
            downsample_loss(ratios), find_spikes(ratios), measure, (1.0, "random pairs")
        )
        panels.insert(0, ratio_panel)
    png = loss_plot_png(panels, title=_title(table))
    n_iter = max(losses.size, ratios.size)
    lines += [
        png_image(png, f"{measure.capitalize()} over {n_iter} iterations"),
        "",
        RATIO_MEANING + " " + LOSS_MEANING.replace("Training loss:", "Below, the raw loss:")
        if scale_free
        else LOSS_MEANING,
        "",
    ]
    lines += [
        f"- {_summary(p.ylabel, values)}" for p, values in zip(panels, histories, strict=True)
    ]
    curve = panels[0].curve
    per_bin = math.ceil((curve.n_iter - curve.n_left_out) / max(curve.iteration.size, 1))
    lines.append(
        f"- Drawn on log scales: the median of each of {curve.iteration.size} bins of up to "
        f"{per_bin} iterations; the band spans their minimum and maximum, so that a single "
        "step's spike shows."
        if per_bin > 1
        else "- Drawn on log scales, every iteration."
    )
    lines.append(f"- {_spikes_line(panels)}")
    left_out = [f"{p.curve.n_left_out} of the {p.ylabel}" for p in panels if p.curve.n_left_out]
    if left_out:
        lines.append(f"- Non-finite or non-positive values left out: {', '.join(left_out)}.")
    return "\n".join(lines)


def _title(table: str) -> str:
    """The plot's title: "TDM training", with the table's name where the plot's font has a glyph
    for each of its characters (the Markdown's heading names the table in any case; a missing
    glyph would be drawn as a box, and matplotlib would warn in the run's output)."""
    from matplotlib import font_manager

    font = font_manager.get_font(font_manager.findfont(font_manager.FontProperties()))
    drawable = all(font.get_char_index(ord(character)) for character in table)
    return f"TDM training: {table}" if drawable else "TDM training"


def _summary(name: str, values: np.ndarray) -> str:
    finite = np.flatnonzero(np.isfinite(values))
    if not finite.size:
        return f"{name.capitalize()}: none recorded."
    best = int(finite[np.argmin(values[finite])])
    tail = values[finite[-100:]]
    return (
        f"{name.capitalize()} over {values.size} iterations: {_g(values[finite[0]])} at the "
        f"first, {_g(values[finite[-1]])} at the last (median of the last {tail.size}: "
        f"{_g(float(np.median(tail)))}), lowest {_g(values[best])} at iteration {best + 1}."
    )


def _spikes_line(panels: Sequence[Panel]) -> str:
    found = [
        f"{p.ylabel}: {p.spikes.steps.size} (iteration "
        + ", ".join(
            f"{s + 1}: {_g(t)} times"
            for s, t in zip(p.spikes.steps[:5], p.spikes.times[:5], strict=True)
        )
        + (", …" if p.spikes.steps.size > 5 else "")
        + ")"
        for p in panels
        if p.spikes.steps.size
    ]
    rule = f"above {SPIKE_FACTOR:g} times the median of the {SPIKE_WINDOW} iterations before them"
    if not found:
        return f"No spike (no iteration {rule})."
    return (
        f"Spikes (marked), iterations {rule}: {'; '.join(found)}. The fit carries on from them; "
        "the progress log reports medians, which they do not move."
    )


def _g(value: float) -> str:
    return format_number(value, digits=3)
