"""The demo warehouse: scikit-learn's wine data in a DuckDB file, with cells knocked out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from tasks.errors import PipelineInputError
from tasks.warehouse.names import quote_identifier
from tasks.warehouse.tables import columns_sql, register_frame

__all__ = [
    "DEMO_DB_PATH",
    "DEMO_KEY",
    "DEMO_TABLE",
    "DemoScore",
    "DemoWarehouse",
    "build_demo_warehouse",
    "score_demo",
]

DEMO_DB_PATH = Path("demo") / "warehouse.duckdb"
DEMO_TABLE = "wines"
DEMO_TRUTH_TABLE = "wines_complete"
DEMO_KEY = "wine_id"

_MARKER = "the data of tdm demo, which replaces it on every run"
"""The comment `tdm demo` leaves on its tables: one without it is not replaced."""

_INTEGER_COLUMNS = frozenset({"magnesium", "proline"})
_CATEGORICAL = "cultivar"


@dataclass(frozen=True)
class DemoWarehouse:
    """Where the demo table is, and what was knocked out of it."""

    db_path: Path
    table: str
    truth_table: str
    key: str
    rows: int
    numeric_columns: tuple[str, ...]
    pass_through_columns: tuple[str, ...]
    missing_cells: int
    categorical_columns: tuple[str, ...] = (_CATEGORICAL,)
    missing_labels: int = 0


@dataclass(frozen=True)
class DemoScore:
    """Mean absolute error on the knocked-out numeric cells, in units of each column's std; and
    the share of knocked-out labels imputed wrong, by TDM and by the most frequent label."""

    cells: int
    mae_imputed: float
    mae_mean: float
    labels: int = 0
    label_error_imputed: float = float("nan")
    label_error_mode: float = float("nan")


def build_demo_warehouse(
    db_path: str | Path = DEMO_DB_PATH, *, missing_rate: float = 0.25, seed: int = 0
) -> DemoWarehouse:
    """Write `wines` (with MCAR missing cells) and `wines_complete` (the truth) to `db_path`.

    The wine data (178 rows, 13 numeric columns, two of them INTEGER) ships with scikit-learn;
    a key, the cultivar (a text column, its labels knocked out at the same rate), a date and a
    boolean column are added so that the table mixes types. Existing demo tables are replaced;
    a table by either name that the demo did not write (no comment of the demo's, other
    columns) is refused, and other tables in the file, `tdm_lineage` included, are kept.
    """
    from sklearn.datasets import load_wine

    if not 0 < missing_rate < 1:
        raise ValueError(f"missing_rate must lie in (0, 1); got {missing_rate}")
    rng = np.random.default_rng(seed)
    wine = load_wine(as_frame=True)
    features = wine.data
    n_rows = len(features)
    extras = pd.DataFrame(
        {
            DEMO_KEY: np.arange(1, n_rows + 1, dtype=np.int32),
            "cultivar": np.asarray(wine.target_names)[wine.target.to_numpy()],
            "bottled_on": pd.Timestamp("2019-01-01")
            + pd.to_timedelta(rng.integers(0, 3 * 365, n_rows), unit="D"),
            "organic": rng.random(n_rows) < 0.3,
        }
    )
    truth = pd.concat([extras, features], axis=1)
    mask = rng.random(features.shape) < missing_rate
    holed = truth.copy()
    holed[list(features.columns)] = features.mask(mask)
    unlabelled = rng.random(n_rows) < missing_rate
    holed[_CATEGORICAL] = truth[_CATEGORICAL].astype(object).mask(unlabelled)

    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        for table in (DEMO_TRUTH_TABLE, DEMO_TABLE):
            _check_demo_table(con, path, table, list(truth.columns))
        for table, frame in ((DEMO_TRUTH_TABLE, truth), (DEMO_TABLE, holed)):
            with register_frame(con, frame, "demo_frame") as view:
                con.execute(
                    f"CREATE OR REPLACE TABLE {table} AS SELECT {_typed_columns(frame)} FROM {view}"
                )
            con.execute(f"COMMENT ON TABLE {table} IS '{_MARKER}'")
    return DemoWarehouse(
        db_path=path,
        table=DEMO_TABLE,
        truth_table=DEMO_TRUTH_TABLE,
        key=DEMO_KEY,
        rows=n_rows,
        numeric_columns=tuple(features.columns),
        pass_through_columns=("bottled_on", "organic"),
        missing_cells=int(mask.sum()),
        missing_labels=int(unlabelled.sum()),
    )


def _check_demo_table(
    con: duckdb.DuckDBPyConnection, path: Path, table: str, columns: list[str]
) -> None:
    """Refuse to replace `table` when it exists and is not the demo's: without the demo's
    comment, and with other columns than the demo's (a demo table of an earlier version)."""
    found = con.execute(
        "SELECT t.comment, list(c.column_name ORDER BY c.column_index) FROM duckdb_tables() t "
        "JOIN duckdb_columns() c USING (database_name, schema_name, table_name) "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "AND lower(table_name) = lower(?) GROUP BY t.comment",
        [table],
    ).fetchall()
    if found and found[0][0] != _MARKER and list(found[0][1]) != columns:
        raise PipelineInputError(
            f"The table \"{table}\" in '{path}' is not the demo's, which `tdm demo` writes under "
            "that name, so nothing was written. Give the demo a file of its own (--db)."
        )


def _typed_columns(frame: pd.DataFrame) -> str:
    """SELECT list giving the demo its SQL types: INTEGER counts, a DATE, the rest as read."""

    def typed(name: str) -> str:
        quoted = quote_identifier(name)
        if name in _INTEGER_COLUMNS:
            return f"CAST({quoted} AS INTEGER) AS {quoted}"
        if name == "bottled_on":
            return f"CAST({quoted} AS DATE) AS {quoted}"
        return quoted

    return ", ".join(typed(name) for name in frame.columns)


def score_demo(demo: DemoWarehouse, target_table: str) -> DemoScore:
    """MAE of the imputed table and of mean imputation on the knocked-out numeric cells; share
    of wrong labels of the imputed table and of the most frequent label on the knocked-out
    labels."""
    from sklearn.impute import SimpleImputer

    from tdm.metrics import mae

    columns = columns_sql([*demo.numeric_columns, *demo.categorical_columns])
    order = f"ORDER BY {quote_identifier(demo.key)}"
    with duckdb.connect(str(demo.db_path), read_only=True) as con:
        holed = con.execute(f"SELECT {columns} FROM {demo.table} {order}").df()
        truth = con.execute(f"SELECT {columns} FROM {demo.truth_table} {order}").df()
        target = quote_identifier(target_table)
        imputed = con.execute(f"SELECT {columns} FROM {target} {order}").df()
    wrong, wrong_mode, unlabelled = 0, 0, 0
    for name in demo.categorical_columns:
        missing = holed[name].isna().to_numpy()
        mode = holed[name].mode().iloc[0]
        right = truth[name].to_numpy(dtype=object)[missing]
        wrong += int((imputed[name].to_numpy(dtype=object)[missing] != right).sum())
        wrong_mode += int((right != mode).sum())
        unlabelled += int(missing.sum())
    numeric = list(demo.numeric_columns)
    holed, truth, imputed = holed[numeric], truth[numeric], imputed[numeric]
    holed_values = holed.to_numpy(dtype=np.float64, na_value=np.nan)
    mask = np.isnan(holed_values)
    scale = truth.to_numpy(dtype=np.float64).std(axis=0)
    mean_filled = SimpleImputer(strategy="mean").fit_transform(holed_values)
    true_scaled = truth.to_numpy(dtype=np.float64) / scale
    return DemoScore(
        cells=int(mask.sum()),
        mae_imputed=mae(true_scaled, imputed.to_numpy(dtype=np.float64) / scale, mask),
        mae_mean=mae(true_scaled, mean_filled / scale, mask),
        labels=unlabelled,
        label_error_imputed=wrong / unlabelled if unlabelled else float("nan"),
        label_error_mode=wrong_mode / unlabelled if unlabelled else float("nan"),
    )
