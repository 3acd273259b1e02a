"""Targets: no run replaces a table it should not, and tables in other schemas can be imputed.

Each test runs the real steps (`task.fn`) against a real DuckDB file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from schemas.warehouse import TableEntry, WarehouseConfig
from tasks.errors import PipelineInputError
from tasks.impute import impute
from tasks.lineage import LineageRecord, current_run
from tasks.load import load_table
from tasks.quality import check_quality
from tasks.scaling import inverse_scale, standardise
from tasks.targets import check_target_writable, check_warehouse_targets
from tasks.validate import validate_input
from tasks.write import write_back
from tests.tables import constrain_readings


def _every_table(path: Path) -> dict[tuple[str, str], list[tuple]]:
    """Every table of every schema with its rows, sorted (conftest's snapshot reads main only)."""
    with duckdb.connect(str(path), read_only=True) as con:
        names = con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        quote = lambda n: '"' + n.replace('"', '""') + '"'  # noqa: E731
        return {
            (s, t): sorted(map(str, con.execute(f"SELECT * FROM {quote(s)}.{quote(t)}").fetchall()))
            for s, t in names
        }


def _bytes(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(db: Path, table: str, **kwargs: object) -> object:
    """Every step of impute-table, without Prefect: load → ... → check target → write-back."""
    params = {"max_iter": 20, "init": "mean"}  # the start is the library's to test
    source = load_table.fn(str(db), table, "id")
    plan = validate_input.fn(source, None, "id", **kwargs)
    check_target_writable.fn(str(db), plan)
    scaled = standardise.fn(source.frame, plan.columns, table="t")
    outcome = impute.fn(scaled.frame, params, 0, table=table)
    imputed = inverse_scale.fn(outcome.frame, scaled.scaling, source.frame)
    quality = check_quality.fn(source, plan, imputed)
    lineage = LineageRecord(
        run=current_run(), source=source, plan=plan, outcome=outcome, quality=quality, seed=0,
        hyperparameters=dict(params),
    )  # fmt: skip
    return write_back.fn(source, plan, imputed, lineage)


@pytest.mark.parametrize(
    ("tables", "entries"),
    [
        ([{"table": "readings", "target": "B"}, {"table": "b"}], "entry 1"),
        ([{"table": "readings"}, {"table": "readings_IMPUTED"}], "entry 1"),
        ([{"table": "readings", "target": "x"}, {"table": "b", "target": "X"}], "entry 2"),
        ([{"table": "readings", "target": "main.b"}, {"table": "b"}], "entry 1"),
        ([{"table": "readings", "target": "tdm_stuff"}], "entry 1"),
        ([{"table": "readings", "target": "v"}], "entry 1"),
    ],
    ids=["target-is-other-source", "default-target-listed", "same-target-twice",
         "schema-qualified-source", "tdm-table", "view"],
)  # fmt: skip
def test_a_config_whose_targets_clash_is_refused_before_anything_runs(
    warehouse: Path,
    make_readings: Callable[..., object],
    take_snapshot: Callable,
    tables: list,
    entries: str,
) -> None:
    """Bug: the warehouse config check compared explicit targets case-sensitively and ignored
    default targets and views, so one entry's target could replace another entry's source."""
    make_readings(warehouse, table="b", seed=1)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE VIEW v AS SELECT * FROM readings")
    # As the flow checks it, whether or not reading the config already refused it:
    config = WarehouseConfig.model_construct(tables=[TableEntry(**t) for t in tables])
    before, digest = take_snapshot(warehouse), _bytes(warehouse)
    with pytest.raises(PipelineInputError, match=rf"nothing was run: .*{entries} ") as caught:
        check_warehouse_targets.fn(str(warehouse), config, "_imputed")
    assert "\n" not in str(caught.value)
    assert take_snapshot(warehouse) == before
    assert _bytes(warehouse) == digest


def test_explicit_clashes_are_refused_when_the_config_is_read() -> None:
    """Bug: `target: B` was not seen to clash with the listed table `b` (case-sensitive check)."""
    with pytest.raises(ValueError, match=r'entry 1 \("a"\) writes to "B", which is the source'):
        WarehouseConfig.model_validate({"tables": [{"table": "a", "target": "B"}, {"table": "b"}]})


def test_a_target_the_pipeline_did_not_write_is_refused(
    warehouse: Path, take_snapshot: Callable, one_torch_thread: None
) -> None:
    """Bug: --target silently replaced an unrelated existing table (only mentioned after)."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE Other AS SELECT 42 AS x")
    before, digest = take_snapshot(warehouse), _bytes(warehouse)
    with pytest.raises(PipelineInputError, match=r'"Other" already exists .*--replace-target'):
        _run(warehouse, "readings", target="other")
    assert take_snapshot(warehouse) == before
    assert _bytes(warehouse) == digest


@pytest.mark.parametrize("record", ["tdm_imputed_cells", "tdm_lineage"])
def test_a_record_table_of_the_user_s_own_is_refused_before_the_fit(
    warehouse: Path, take_snapshot: Callable, record: str
) -> None:
    """Bug: a table of the user's own called tdm_imputed_cells failed the run after the fit with
    DuckDB's binder error. It is refused first, naming the columns it lacks."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute(f"CREATE TABLE {record} (run_id VARCHAR, note VARCHAR)")
    before, digest = take_snapshot(warehouse), _bytes(warehouse)
    source = load_table.fn(str(warehouse), "readings", "id")
    plan = validate_input.fn(source, None, "id")
    with pytest.raises(
        PipelineInputError, match=rf'"{record}" is not the record .*\'target_table\''
    ):
        check_target_writable.fn(str(warehouse), plan)
    assert take_snapshot(warehouse) == before
    assert _bytes(warehouse) == digest


def test_a_target_another_table_references_is_refused_before_the_fit(
    warehouse: Path, take_snapshot: Callable, one_torch_thread: None
) -> None:
    """Bug: a target the pipeline wrote, then referenced by the user's table through a FOREIGN
    KEY, failed the next run after the fit with DuckDB's "Could not drop the table because this
    table is main key table". The check before the fit refuses it, naming that table."""
    constrain_readings(warehouse)  # a PRIMARY KEY, which the target keeps
    _run(warehouse, "readings")
    with duckdb.connect(str(warehouse)) as con:
        con.execute(
            "CREATE TABLE child (id INTEGER REFERENCES readings_imputed (id), note VARCHAR)"
        )
    before, digest = take_snapshot(warehouse), _bytes(warehouse)
    refused = r'"readings_imputed" would be written anew, but "child" references it'
    with pytest.raises(PipelineInputError, match=refused):
        _run(warehouse, "readings")
    assert take_snapshot(warehouse) == before and _bytes(warehouse) == digest


@pytest.mark.parametrize("index", ["CREATE INDEX ia ON s (a)", "CREATE UNIQUE INDEX ia ON s (a)"])
def test_an_in_place_update_a_foreign_key_would_block_is_refused_before_the_fit(
    tmp_path: Path, take_snapshot: Callable, index: str
) -> None:
    """Bug: updating in place a table that another table references, with an index on an
    imputed column, failed after the fit with DuckDB's foreign-key error, blamed on the imputed
    values (DuckDB updates an indexed column by delete and insert). Refused before the fit,
    saying why, when a referenced row has a cell to impute there; else it goes through."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE s (id INTEGER PRIMARY KEY, a DOUBLE, b DOUBLE)")
        con.execute(
            "INSERT INTO s SELECT i, CASE WHEN i % 4 = 0 THEN NULL ELSE i * 1.5 END, sin(i) "
            "FROM range(40) r(i)"
        )
        con.execute(index)
        con.execute("CREATE TABLE child (cid INTEGER, sid INTEGER REFERENCES s (id))")
        con.execute("INSERT INTO child SELECT i, i FROM range(40) r(i)")
    before, digest = take_snapshot(db), _bytes(db)
    refused = r'"s" cannot be updated in place: .* \("a" \(index ia\)\) .* \(10 of "child" '
    with pytest.raises(PipelineInputError, match=refused):
        _run(db, "s", replace_source=True)
    assert take_snapshot(db) == before and _bytes(db) == digest
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM child WHERE sid % 4 = 0")  # no referenced row to update now
    assert _run(db, "s", replace_source=True).cells_imputed == 10


def test_replace_target_replaces_and_own_targets_are_rewritten(
    warehouse: Path, one_torch_thread: None
) -> None:
    """Bug guard: the --replace-target opt-in replaces an unrelated table, and a target the
    pipeline wrote before (named in tdm_lineage) is rewritten without it."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE other AS SELECT 42 AS x")
    first = _run(warehouse, "readings", target="other", replace_target=True)
    assert first.replaced_existing
    again = _run(warehouse, "readings", target="OTHER")
    assert again.replaced_existing
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM other").fetchall()[0][0] == 80


def test_a_table_made_at_a_target_written_before_markers_is_refused_once_marked(
    warehouse: Path, take_snapshot: Callable, one_torch_thread: None
) -> None:
    """Bug (upgrade): a target written by a release before markers (its lineage rows carry
    none) was rewritten, and marked, by this one; the user then dropped it and made a table of
    their own at its name, which the next run replaced without a word (a lineage row without
    a marker matched any table without a comment). A target of such lineage only is still
    taken for the pipeline's."""
    _run(warehouse, "readings")
    with duckdb.connect(str(warehouse)) as con:  # as a release before markers left it
        con.execute("UPDATE tdm_lineage SET target_marker = NULL")
        con.execute("COMMENT ON TABLE readings_imputed IS NULL")
    assert _run(warehouse, "readings").replaced_existing  # still the pipeline's: rewritten
    with duckdb.connect(str(warehouse)) as con:
        query = "SELECT comment FROM duckdb_tables() WHERE table_name = 'readings_imputed'"
        assert con.execute(query).fetchone()[0] is not None
        con.execute("DROP TABLE readings_imputed")
        con.execute("CREATE TABLE readings_imputed AS SELECT 'my own data' AS note")
    before = take_snapshot(warehouse)
    with pytest.raises(PipelineInputError, match=r'"readings_imputed" already exists'):
        _run(warehouse, "readings")
    assert take_snapshot(warehouse) == before


def test_a_table_in_another_schema_is_imputed_into_that_schema(
    warehouse: Path, one_torch_thread: None
) -> None:
    """Bug: `--table s.t` said the table does not exist: schema-qualified names were unknown."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute('CREATE SCHEMA "My Schema"')
        con.execute('CREATE TABLE "My Schema"."Odd ""T""" AS SELECT * FROM readings')
    source = _every_table(warehouse)
    result = _run(warehouse, 'my schema.odd "t"')
    assert result.target_table == 'My Schema.Odd "T"_imputed'
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        assert ("My Schema", 'Odd "T"_imputed') in tables
        assert ("main", "tdm_lineage") in tables and ("main", "tdm_imputed_cells") in tables
        filled = con.execute(
            'SELECT count(*) FROM "My Schema"."Odd ""T""_imputed" WHERE temperature IS NULL'
        ).fetchall()[0][0]
        lineage = con.execute("SELECT source_table, target_table FROM tdm_lineage").fetchall()
    assert filled == 0
    assert lineage == [('My Schema.Odd "T"', 'My Schema.Odd "T"_imputed')]
    after = _every_table(warehouse)
    assert {t: after[t] for t in source} == source


def test_a_target_in_a_missing_schema_is_refused(warehouse: Path, take_snapshot: Callable) -> None:
    """Bug guard: a `schema.table` target whose schema does not exist is refused by name."""
    source = load_table.fn(str(warehouse), "readings", "id")
    plan = validate_input.fn(source, None, "id", "nowhere.t")
    before = take_snapshot(warehouse)
    with pytest.raises(PipelineInputError, match=r'schema "nowhere", which does not exist'):
        check_target_writable.fn(str(warehouse), plan)
    assert take_snapshot(warehouse) == before
