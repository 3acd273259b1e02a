"""Write one named section of BENCHMARKS.md, leaving the other sections as they are."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\n"
    "Every section is written by the command it names; machines here are shared and noisy, so\n"
    "each compares against a baseline measured in the same run (ratios).\n"
)


def replace_section(title: str, body: str, path: Path = BENCHMARKS) -> None:
    """Replace (or append) the section ``## {title}`` with ``body``."""
    text = path.read_text() if path.exists() else HEADER
    block = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text)
