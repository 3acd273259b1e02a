"""The `tdm` command: exit codes, messages, settings precedence, `tdm demo` and `tdm warehouse`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from cli.main import _imputer as imputer_flags
from cli.main import build_parser, main
from tasks.imputer_settings import (
    PIPELINE_SET,
    imputer_settings,
    setting_names,
    settings_from_env,
)
from tests.tables import file_hash

REPO = Path(__file__).resolve().parents[2]


def test_every_library_setting_has_a_flag_and_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of TDMImputer's public parameters but those the pipeline sets is a `tdm impute`
    flag and a TDM_* variable, read from the library, not listed by the pipeline."""
    from tdm import TDMImputer

    actions = build_parser()._subparsers._group_actions[0].choices["impute"]._actions
    flags = {option for action in actions for option in action.option_strings}
    expected = set(TDMImputer._get_param_names()) - set(PIPELINE_SET)
    assert expected and expected == set(setting_names())
    for name in expected:
        assert f"--{name.replace('_', '-')}" in flags
        monkeypatch.setenv(f"TDM_{name.upper()}", "none")
    assert settings_from_env() == dict.fromkeys(expected)


def test_flags_override_environment_which_overrides_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--max-iter beats TDM_MAX_ITER, which beats the library's default; the flow merges the
    flags given over the variables."""
    monkeypatch.delenv("TDM_INIT")  # the suite's own
    monkeypatch.setenv("TDM_MAX_ITER", "500")
    monkeypatch.setenv("TDM_LR", "0.05")
    parser = build_parser()
    assert imputer_flags(parser.parse_args(["impute", "--table", "t"])) == {}
    assert settings_from_env() == {"max_iter": 500, "lr": 0.05}
    given = imputer_flags(parser.parse_args(["impute", "--table", "t", "--max-iter", "9"]))
    merged = imputer_settings(settings_from_env(), given, subject="x")
    assert merged == {"max_iter": 9, "lr": 0.05}


def test_values_keep_the_library_s_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    """--network-lr none asks for the library's None ("use lr"), which the pipeline once took
    for 3e-3; boolean settings are switches and variables."""
    parser = build_parser()
    none = imputer_flags(parser.parse_args(["impute", "--table", "t", "--network-lr", "none"]))
    assert none == {"network_lr": None}
    off = parser.parse_args(["impute", "--table", "t", "--no-early-stopping"])
    assert imputer_flags(off) == {"early_stopping": False}
    for name in ("TDM_INIT", "TDM_MAX_ITER"):  # the suite's own
        monkeypatch.delenv(name)
    monkeypatch.setenv("TDM_EARLY_STOPPING", "true")
    assert settings_from_env() == {"early_stopping": True}


def test_help_and_missing_command_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """`tdm --help` exits 0; `tdm` alone prints help and exits 2."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--help"])
    assert exited.value.code == 0
    assert main([]) == 2 and "impute" in capsys.readouterr().err


def _sub_commands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


@pytest.mark.parametrize("command", _sub_commands())
def test_every_command_s_help_prints_and_exits_0(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a % in a setting's description made `tdm impute --help` and `tdm demo --help`
    crash with 'unsupported format character'."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command, "--help"])
    assert exited.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_invalid_setting_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad TDM_* value is reported by name, with exit status 2."""
    monkeypatch.setenv("TDM_MAX_ITER", "many")
    assert main(["impute", "--table", "t"]) == 2
    assert "max_iter" in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_impute_writes_the_target_and_says_where(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm impute` exits 0 and reports the target, the cells imputed and the lineage run, then
    the run's report in full, as `tdm run` prints it."""
    args = ["impute", "--db", str(warehouse), "--table", "readings", "--key", "id"]
    assert main([*args, "--columns", "temperature,pressure", "--max-iter", "8"]) == 0
    out = capsys.readouterr().out
    assert "Wrote 'readings_imputed'" in out and "tdm_lineage" in out
    assert "\n\n# Imputation of `readings` → `readings_imputed`: passed" in out
    assert "| column | cells imputed |" in out and "## Run" in out
    with duckdb.connect(str(warehouse), read_only=True) as con:
        row = con.execute("SELECT columns_imputed, n_iter FROM tdm_lineage").fetchall()[0]
    assert json.loads(row[0]) == ["temperature", "pressure"] and row[1] == 8
    assert main([*args, "--max-iter", "8", "--draws", "10", "--fill", "draw"]) == 0
    out = capsys.readouterr().out
    assert "replaced the existing table" in out
    assert "- fill: one draw of the missing cells" in out and "- draws: 10 per imputed cell" in out
    with duckdb.connect(str(warehouse), read_only=True) as con:
        cells = con.execute(
            "SELECT column_name, low, high FROM tdm_imputed_cells WHERE run_id = ?",
            [out.split("Lineage: run ")[1].split()[0]],
        ).df()
    assert len(cells) == 62 and cells[["low", "high"]].notna().all().all()
    assert (cells["low"] <= cells["high"]).all()
    visits = cells[cells["column_name"] == "visits"]  # an INTEGER column: whole numbers
    assert (visits[["low", "high"]] == visits[["low", "high"]].round()).all().all()
    with pytest.raises(SystemExit, match="2"):
        main([*args, "--draws", "1"])
    assert "argument --draws: expected 0 (no draws) or at least 2" in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_harness")
def test_bad_input_is_one_line_with_exit_2(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A column of a type that cannot be imputed exits 2 with the reason on stderr."""
    args = ["impute", "--db", str(warehouse), "--table", "readings", "--columns", "day"]
    assert main(args) == 2
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("tdm impute: error: Only numeric, text (VARCHAR), ENUM and BOOLEAN")
    assert '"day" (DATE)' in last and "Traceback" not in captured.out + captured.err


@pytest.mark.usefixtures("prefect_harness")
def test_a_foreseen_error_is_said_once_without_traceback_or_log(
    warehouse: Path, tmp_path: Path
) -> None:
    """As a user sees it (a process of its own, default log level): a missing table exits 2 with
    one line on stderr, no traceback, no "nanobind: leaked" reports after it (a bug: about 45
    lines of them followed), and no traceback log file."""
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
    }
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "impute", "--db", str(warehouse), "--table", "nowhere"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith('tdm impute: error: Table "nowhere" does not exist')
    assert "nanobind" not in run.stdout + run.stderr
    assert not list(tmp_path.glob("prefect-home/logs/tdm-*.log"))


@pytest.mark.usefixtures("prefect_harness")
def test_demo_builds_imputes_and_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tdm demo` writes the demo warehouse, imputes it and prints the errors and where to look."""
    db = tmp_path / "demo" / "warehouse.duckdb"
    assert main(["demo", "--db", str(db), "--max-iter", "20"]) == 0
    out = capsys.readouterr().out
    assert "178 wines" in out and "Wrote 'wines_imputed'" in out
    assert "TDM" in out and "mean imputation" in out and "Where to look" in out
    assert "labels removed" in out and "Wrong labels among the" in out
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"wines", "wines_complete", "wines_imputed", "tdm_lineage"} <= tables


def test_demo_replaces_its_own_tables_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `tdm demo --db FILE` replaced a table of the user's own called `wines` without a
    word. It is refused and the file is left as it was; the demo's own tables are rebuilt on
    the next run."""
    db = tmp_path / "mine.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE wines AS SELECT 42 AS precious")
    digest = file_hash(db)
    assert main(["demo", "-q", "--db", str(db), "--max-iter", "5"]) == 2
    assert 'The table "wines" in' in capsys.readouterr().err and file_hash(db) == digest
    own = tmp_path / "demo.duckdb"
    for _ in range(2):
        assert main(["demo", "-q", "--db", str(own), "--max-iter", "5"]) == 0


@pytest.mark.usefixtures("prefect_harness")
def test_warehouse_imputes_the_configured_tables_and_names_failures(
    warehouse: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`tdm warehouse` imputes every table of the config and exits 2 naming a failed table,
    after printing what the others wrote (bug: it printed only the error), and how to run it
    alone again (`--tables`: a name the config does not list is refused); a bad flag is named
    as the flag (bug: as the TDM_* variable the command passed it in)."""
    monkeypatch.setenv("TDM_MAX_ITER", "6")
    monkeypatch.delenv("TDM_TASK_RUNNER", raising=False)
    monkeypatch.delenv("TDM_DRAWS", raising=False)
    config = tmp_path / "w.yaml"
    config.write_text("tables:\n  - table: readings\n    key: id\n", encoding="utf-8")
    args = ["warehouse", "--config", str(config), "--db", str(warehouse)]
    assert main([*args, "--task-runner", "threads"]) == 0
    out = capsys.readouterr().out
    assert "Imputed 1 table in" in out and "Lineage: run " in out
    holed = ("temperature", "pressure", "humidity", "visits")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        nulls = con.execute(
            "SELECT " + ", ".join(f"count(*) - count({c})" for c in holed) + " FROM readings"
        ).fetchall()[0]
    per_column = ", ".join(f"{c} {n}" for c, n in zip(holed, nulls, strict=True))
    assert (
        f"readings -> readings_imputed: 80 rows, {sum(nulls)} cells imputed ({per_column})" in out
    )
    assert "TDM_TASK_RUNNER" not in os.environ  # bug: a flag stayed set for a later command

    with pytest.raises(SystemExit, match="2"):
        main([*args, "--draws", "1"])
    err = capsys.readouterr().err
    assert "argument --draws: expected 0 (no draws) or at least 2" in err
    assert "TDM_DRAWS" not in err and "TDM_DRAWS" not in os.environ

    config.write_text("tables:\n  - table: nowhere\n  - table: readings\n", encoding="utf-8")
    assert main(args) == 2
    captured = capsys.readouterr()
    assert "Imputed 1 of 2 tables in" in captured.out and "Lineage: run " in captured.out
    assert "(nowhere failed: the reasons follow):\n" in captured.out
    assert "readings -> readings_imputed (replacing the existing table): 80 rows" in captured.out
    assert '1 of 2 tables failed (the others were written):\n  [nowhere] Table "nowhere"' in (
        captured.err
    )
    assert "To run the failed tables alone once their causes are fixed: nowhere as " in (
        captured.err
    )

    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE nowhere AS SELECT * FROM readings")
    assert main([*args, "--tables", "NOWHERE"]) == 0  # names as DuckDB compares them
    out = capsys.readouterr().out
    assert "Imputed 1 table in" in out and "nowhere -> nowhere_imputed: 80 rows" in out
    assert "readings ->" not in out
    assert main([*args, "--tables", "readings,elsewhere"]) == 2
    err = capsys.readouterr().err
    assert "does not list: elsewhere not listed in the config (it lists nowhere, readings)" in err


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_dry_run_reports_what_would_be_written_and_leaves_the_file_as_it_was(
    warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm impute --dry-run` and `tdm warehouse --dry-run`: the DuckDB file keeps its bytes."""

    before = file_hash(warehouse)
    args = ["impute", "--db", str(warehouse), "--table", "readings", "--max-iter", "5"]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Dry run of 'readings', nothing written to {warehouse}: a run would ")
    assert "create the table 'readings_imputed' with 80 rows" in out and "5 iterations" in out
    assert file_hash(warehouse) == before

    config = tmp_path / "w.yaml"
    config.write_text("tables:\n  - table: readings\n", encoding="utf-8")
    dry = ["warehouse", "--config", str(config), "--db", str(warehouse), "--dry-run"]
    assert main(dry) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Dry run, nothing written to {warehouse}: a run would impute 1 table on")
    # bug: one line, without the cells per column or what would be created, as `impute` gives
    assert "a run would create the table 'readings_imputed' with 80 rows" in out
    assert "cells imputed (temperature " in out
    assert file_hash(warehouse) == before


def test_where_to_see_the_run_names_the_server_the_run_was_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review (the work-pool recipe): `tdm demo` on a server of the user's own said to start
    one on port 4200."""
    from cli.main import _where_the_ui_is

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_API_PORT", raising=False)
    assert _where_the_ui_is() == "run `prefect server start` and open http://127.0.0.1:4200"
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4461/api")
    assert _where_the_ui_is() == "open http://127.0.0.1:4461"
