"""Rename the trials of tdm 0.2's default (``init="ice"``) after ``init="auto"`` became the
default (tdm 0.2 -> 0.3).

A trial's key holds the hash of the imputer's effective settings. The ``tdm`` rows of tdm 0.2
carry the hash of ``init="ice"`` with 0.2's other defaults: exactly the settings now pinned as
the method ``tdm_ice_init``. They move there under the same hash (the settings, and so the
behaviour, are the same); only the method name changes. A ``tdm`` row with any other hash is left
alone. Re-running is harmless.

Run: ``.venv/bin/python results/migrations/tdm_0_3_auto_init.py results/heldout/benchmark.duckdb``
"""

from __future__ import annotations

import argparse

import duckdb
from _rekey import settings_without

from schemas.benchmark import RESULTS_TABLE, TRACES_TABLE
from tdm.trial import params_hash

# Added by tdm 0.4 (``tdm_0_4_cell_lr.py`` keys it in afterwards).
LATER = ("cell_lr_correction",)


def migrate(db_path: str) -> None:
    pinned = settings_without("tdm_ice_init", LATER)
    if pinned.get("init") != "ice":
        raise SystemExit(f"tdm_ice_init: expected init='ice', got {pinned.get('init')!r}")
    key = params_hash(pinned)
    with duckdb.connect(db_path) as con:
        con.execute("BEGIN TRANSACTION")
        where = "method = 'tdm' AND params_hash = ?"
        found = con.execute(f'SELECT count(*) FROM "{RESULTS_TABLE}" WHERE {where}', [key])
        count = (found.fetchone() or (0,))[0]
        for table in (RESULTS_TABLE, TRACES_TABLE):
            con.execute(f"UPDATE \"{table}\" SET method = 'tdm_ice_init' WHERE {where}", [key])
        con.execute("COMMIT")
    print(f"{db_path}: {count} tdm trials -> tdm_ice_init ({key})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db", nargs="+")
    for path in parser.parse_args().db:
        migrate(path)
