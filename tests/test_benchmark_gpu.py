"""The GPU benchmark's report keeps what it measured when a device's time limit stops it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import gpu


def test_the_section_file_holds_every_line_added_so_far(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    section = gpu.Section(out)
    section.add("Command: x", "")
    assert out.read_text() == "Command: x\n\n"
    section.add("| 8 | 1.0 |")
    assert out.read_text() == "Command: x\n\n| 8 | 1.0 |\n"
    assert section.text() == "Command: x\n\n| 8 | 1.0 |"


def test_an_unknown_part_is_refused_before_any_device_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["gpu", "--parts", "steps,speed"])
    with pytest.raises(SystemExit) as exit_info:
        gpu.main()
    assert exit_info.value.code == 2
    assert "--parts takes steps, california, agreement" in capsys.readouterr().err
