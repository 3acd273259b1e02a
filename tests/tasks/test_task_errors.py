"""Error hints name a setting in every way a run is started, never a `tdm` flag alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.errors import setting

REPO = Path(__file__).resolve().parents[2]
FLAGS = ("db", "key", "columns", "target", "replace-target", "replace-source")


@pytest.mark.parametrize(
    ("name", "parameter", "flag"),
    [
        ("db_path", "db_path parameter", "--db flag"),
        ("target_table", "target_table parameter", "--target flag"),
        ("key", "key parameter", "--key flag"),
        ("columns", "columns parameter", "--columns flag"),
        ("replace_source", "replace_source parameter", "--replace-source flag"),
        ("replace_target", "replace_target parameter", "--replace-target flag"),
    ],
)
def test_a_setting_is_named_as_parameter_and_flag(name: str, parameter: str, flag: str) -> None:
    assert parameter in setting(name) and flag in setting(name)


def test_no_hint_in_tasks_or_flows_names_a_flag_alone() -> None:
    """Bug: hints said `--db (or TDM_DB_PATH)` to a run started from the UI, whose parameter is
    db_path. Flags are named in `tasks/errors.py` only, beside the parameter's name (the
    benchmark's modules name `tdm bench`'s own flags: they are not the pipeline's)."""
    pattern = re.compile(r"--(" + "|".join(map(re.escape, FLAGS)) + r")\b")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("tasks", "flows")
        for path in sorted((REPO / folder).glob("*.py"))
        if path.name not in ("errors.py", "bench.py", "benchmark.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, found
