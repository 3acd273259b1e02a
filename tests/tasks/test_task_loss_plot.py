"""The training plot: binned histories on log scales, spikes found and shown, and its markdown."""

from __future__ import annotations

import base64
import re
import struct

import numpy as np
import pytest

from tasks.artifacts.loss_plot import (
    RATIO_MEANING,
    Panel,
    downsample_loss,
    find_spikes,
    loss_plot_markdown,
    loss_plot_png,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk comes first
    return int(width), int(height)


def _embedded_png(text: str) -> bytes:
    match = re.search(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert match is not None, text
    return base64.b64decode(match.group(1))


def _fit_like(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A loss falling from 2.6 by three orders of magnitude, with a 2,000-fold spike at
    iteration 1035 and a smaller one at 1036, and a flat noisy ratio near 0.5."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    loss = 2.6 * np.exp(-steps / 3) + 0.008 * (1 + 0.1 * rng.random(n))
    loss[1034] *= 2000
    loss[1035] *= 30
    ratio = 0.5 + 0.05 * rng.standard_normal(n)
    return loss, ratio


def test_histories_are_binned_by_median_min_and_max_and_non_positive_values_left_out() -> None:
    """Ten values in three bins: medians, extremes and middle iterations by hand."""
    curve = downsample_loss(np.array([1.0, 9.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 30.0]), 3)
    np.testing.assert_allclose(curve.iteration, [2.5, 6.0, 9.0])  # bins 1-4, 5-7, 8-10
    np.testing.assert_allclose(curve.median, [2.5, 5.0, 8.0])
    np.testing.assert_allclose(curve.low, [1.0, 4.0, 7.0])
    np.testing.assert_allclose(curve.high, [9.0, 6.0, 30.0])
    assert (curve.n_iter, curve.n_left_out) == (10, 0)
    short = downsample_loss(np.array([1.0, np.nan, 3.0, np.inf, 0.0, -1.0]))
    np.testing.assert_allclose(short.iteration, [1.0, 3.0])
    assert (short.n_iter, short.n_left_out) == (6, 4)
    assert downsample_loss(np.arange(1.0, 20_001.0)).iteration.size == 300
    with pytest.raises(ValueError, match="max_points must be at least 1, got 0"):
        downsample_loss(np.arange(3.0), max_points=0)


def test_a_single_step_spike_survives_the_binning() -> None:
    """2,000 steps in 300 bins: the bin holding the spike has it as its maximum."""
    loss, _ = _fit_like()
    curve = downsample_loss(loss)
    assert curve.high.max() == loss[1034]
    assert np.median(curve.median) < 0.01  # the line itself is not pulled up


def test_spikes_are_steps_far_above_the_median_of_the_steps_before_them() -> None:
    """The injected spikes, and not the fast fall of the first steps, nor a NaN step."""
    loss, ratio = _fit_like()
    loss[1500] = np.nan
    spikes = find_spikes(loss)
    assert spikes.steps.tolist() == [1034, 1035]
    np.testing.assert_allclose(spikes.values, loss[[1034, 1035]])
    assert 1500 < spikes.times[0] < 2500 and 20 < spikes.times[1] < 40
    assert find_spikes(ratio).steps.size == 0
    assert find_spikes(np.r_[np.ones(50), 100.0]).steps.tolist() == [50]
    assert find_spikes(np.r_[np.ones(49), 100.0]).steps.size == 0  # too early to judge


def test_the_plot_is_a_reproducible_png_of_one_or_two_panels() -> None:
    """640 pixels wide, taller with the loss panel under the ratio's; the same bytes each time."""
    loss, ratio = _fit_like()
    panels = [
        Panel(downsample_loss(ratio), find_spikes(ratio), "ratio", (1.0, "random pairs")),
        Panel(downsample_loss(loss), find_spikes(loss), "training loss"),
    ]
    png = loss_plot_png(panels, title="t")
    assert _png_size(png) == (640, 336)
    assert len(png) < 80_000
    assert loss_plot_png(panels, title="t") == png
    assert _png_size(loss_plot_png(panels[1:], title="t")) == (640, 256)


def test_markdown_shows_the_ratio_over_the_loss_and_names_the_spikes() -> None:
    """The image, the one-sentence meaning, first/last/lowest of each history and the spikes."""
    loss, ratio = _fit_like()
    text = loss_plot_markdown(loss, "sales", ratio)
    lines = text.splitlines()
    assert lines[0] == "# Training of `sales`: relative transport cost"
    assert lines[2].startswith("![Relative transport cost over 2000 iterations](data:image/png")
    assert _png_size(_embedded_png(text)) == (640, 336)
    assert lines[4].startswith(RATIO_MEANING)
    assert "- Training loss over 2000 iterations: 2.61 at the first, " in text
    assert "the median of each of 300 bins of up to 7 iterations" in text
    assert "training loss: 2 (iteration 1035: " in text and ", 1036: " in text
    assert "relative transport cost: " not in text.split("Spikes")[1]  # no spike in the ratio


def test_markdown_without_a_ratio_plots_the_loss_alone() -> None:
    """A history recorded without the ratio (NaN, or none) is plotted as the raw loss."""
    loss = np.array([4.0, 2.0, np.nan, 1.0, 1.5])
    for ratio in (None, np.full(5, np.nan)):
        text = loss_plot_markdown(loss, "sales", ratio)
        assert text.startswith("# Training of `sales`: training loss")
        assert _png_size(_embedded_png(text)) == (640, 256)
        assert "- Training loss over 5 iterations: 4.00 at the first, 1.50 at the last" in text
        assert "lowest 1.00 at iteration 4." in text
        assert "Drawn on log scales, every iteration." in text
        assert "left out: 1 of the training loss." in text
    assert "No loss was recorded" in loss_plot_markdown(np.empty(0), "sales", np.empty(0))


def test_the_title_names_the_table_where_its_font_can_draw_the_name(
    recwarn: pytest.WarningsRecorder,
) -> None:
    """A name with a character the plot's font lacks (a CJK table name) is left out of the
    image's title, without matplotlib's missing-glyph warning in the run's output; the heading
    names the table either way, and an accented Latin name stays in the title."""
    loss, ratio = _fit_like()
    measure = "relative transport cost"
    panels = [
        Panel(downsample_loss(ratio), find_spikes(ratio), measure, (1.0, "random pairs")),
        Panel(downsample_loss(loss), find_spikes(loss), "training loss"),
    ]
    cjk = loss_plot_markdown(loss, "Ünïcode表", ratio)
    assert cjk.startswith("# Training of `Ünïcode表`")
    assert _embedded_png(cjk) == loss_plot_png(panels, title="TDM training")
    latin = loss_plot_markdown(loss, "Ünïcode", ratio)
    assert _embedded_png(latin) == loss_plot_png(panels, title="TDM training: Ünïcode")
    assert [str(w.message) for w in recwarn if "Glyph" in str(w.message)] == []
    dollars = loss_plot_markdown(loss, "a$_$", ratio)  # plain text, not mathtext (it raised)
    assert _embedded_png(dollars) == loss_plot_png(panels, title="TDM training: a$_$")
