"""Re-keying of recorded trials after a setting is added to the imputer (shared by the migrations).

A trial's key holds the hash of the imputer's effective settings. When a version adds a setting,
the rows recorded before carry the hash of the settings without it. :func:`rekey` moves the rows
of each ``(old method, new method)`` pair whose hash is exactly that of the new method's settings
less the added one, to the new method's full hash (and name). :func:`check` refits one recorded
trial of each new method and compares its MAE bit for bit.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import duckdb

from schemas.benchmark import RESULTS_TABLE, TRACES_TABLE
from tdm.trial import effective_params, params_hash


def settings_without(method: str, later: Sequence[str]) -> dict[str, Any]:
    """``method``'s effective settings less those added by ``later`` versions: the settings a
    migration's rows are keyed on when the migrations are run in order on an old file."""
    return {k: v for k, v in effective_params(method).items() if k not in later}


def _keys(new_method: str, setting: str, value: Any, later: Sequence[str]) -> tuple[str, str, str]:
    new = settings_without(new_method, later)
    if new.get(setting) != value:
        raise SystemExit(f"{new_method}: expected {setting}={value!r}, got {new.get(setting)!r}")
    old = {k: v for k, v in new.items() if k != setting}
    return params_hash(old), params_hash(new), json.dumps(new, sort_keys=True, default=str)


def rekey(
    db_path: str,
    moves: Sequence[tuple[str, str]],
    setting: str,
    value: Any,
    later: Sequence[str] = (),
) -> None:
    """Move the rows of each pair of ``moves``; ``value`` is what ``setting`` of the new method
    must be (the behaviour the rows were recorded with); ``later``: settings added by later
    versions, left out of both keys. In one transaction; re-running is harmless."""
    with duckdb.connect(db_path) as con:
        con.execute("BEGIN TRANSACTION")
        for old_method, new_method in moves:
            old_hash, new_hash, new_json = _keys(new_method, setting, value, later)
            where = "method = ? AND params_hash = ?"
            (count,) = con.execute(
                f'SELECT count(*) FROM "{RESULTS_TABLE}" WHERE {where}', [old_method, old_hash]
            ).fetchone()
            assignments = "method = ?, params_hash = ?, params = ?"
            con.execute(
                f'UPDATE "{RESULTS_TABLE}" SET {assignments} WHERE {where}',
                [new_method, new_hash, new_json, old_method, old_hash],
            )
            con.execute(
                f'UPDATE "{TRACES_TABLE}" SET method = ?, params_hash = ? WHERE {where}',
                [new_method, new_hash, old_method, old_hash],
            )
            print(f"{db_path}: {count} {old_method} trials -> {new_method} ({new_hash})")
        con.execute("COMMIT")


def check(db_path: str, trials: Sequence[tuple[str, str]]) -> None:
    """For each ``(method, version)`` of ``trials``, refit the first trial of that method
    recorded by that tdm version; exit 1 if its MAE differs in any bit."""
    from tdm.datasets import load_dataset
    from tdm.trial import run_trial

    with duckdb.connect(db_path, read_only=True) as con:
        for method, version in trials:
            row = con.execute(
                f'SELECT dataset, mechanism, seed, p, mae FROM "{RESULTS_TABLE}" '
                "WHERE method = ? AND tdm_version = ? "
                "ORDER BY dataset, mechanism, seed LIMIT 1",
                [method, version],
            ).fetchone()
            if row is None:
                continue
            dataset, mechanism, seed, p, recorded = row
            again = run_trial(load_dataset(dataset), mechanism, seed, method, p=p, svm_repeats=0)
            same = again.mae == recorded
            print(
                f"{method} {dataset}/{mechanism}/seed{seed}: {recorded!r} -> {again.mae!r}",
                "identical" if same else "DIFFERENT",
            )
            if not same:
                raise SystemExit(1)


def main(
    doc: str | None,
    moves: Sequence[tuple[str, str]],
    setting: str,
    value: Any,
    checks: Sequence[tuple[str, str]],
    later: Sequence[str] = (),
) -> None:
    """A migration's command line: ``DB ...`` re-keys, ``--check DB ...`` refits ``checks``."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("db", nargs="+")
    parser.add_argument("--check", action="store_true", help="refit one trial per method")
    args = parser.parse_args()
    for path in args.db:
        if args.check:
            check(path, checks)
        else:
            rekey(path, moves, setting, value, later)
