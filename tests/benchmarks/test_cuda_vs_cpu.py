"""The CUDA-against-CPU benchmark keeps what it measured when a device's time limit stops it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import cuda_vs_cpu


def test_the_section_file_holds_every_line_added_so_far(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    section = cuda_vs_cpu.Section(out)
    section.add("Command: x", "")
    assert out.read_text() == "Command: x\n\n"
    section.add("| 8 | 1.0 |")
    assert out.read_text() == "Command: x\n\n| 8 | 1.0 |\n"
    assert section.text() == "Command: x\n\n| 8 | 1.0 |"


def test_an_unknown_part_is_refused_before_any_device_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["cuda_vs_cpu", "--parts", "steps,speed"])
    with pytest.raises(SystemExit) as exit_info:
        cuda_vs_cpu.main()
    assert exit_info.value.code == 2
    assert "--parts takes steps, california, agreement, repeat" in capsys.readouterr().err


def test_repeat_reports_same_bits_or_how_far_apart_and_leaves_the_global_flag_as_it_was() -> None:
    import itertools

    import numpy as np
    import torch

    assert cuda_vs_cpu.repeated(lambda: np.array([1.0, np.nan])) == "same bits"
    counter = itertools.count()
    assert (
        cuda_vs_cpu.repeated(lambda: np.array([1.0, 0.5 * next(counter)]))
        == "differ (max 5.00e-01)"
    )
    before = torch.are_deterministic_algorithms_enabled()
    seen: list[bool] = []

    def run() -> np.ndarray:
        seen.append(torch.are_deterministic_algorithms_enabled())
        return np.zeros(2)

    assert cuda_vs_cpu.deterministic(run) == "same bits"
    assert seen == [True, True]
    assert torch.are_deterministic_algorithms_enabled() == before

    def refuses() -> np.ndarray:
        raise RuntimeError("index_add_cuda_ does not have a deterministic implementation\nmore")

    assert cuda_vs_cpu.deterministic(refuses) == (
        "refused: index_add_cuda_ does not have a deterministic implementation"
    )
    assert torch.are_deterministic_algorithms_enabled() == before
