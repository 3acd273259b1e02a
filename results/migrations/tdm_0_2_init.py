"""Re-key the TDM trials recorded before ``TDMImputer(init=...)`` existed (tdm 0.1 -> 0.2).

A trial's key holds the hash of the imputer's effective settings. tdm 0.2 added the setting
``init`` ("ice", the new default, or "mean", what every earlier fit did) and made the ICE start
the default. Earlier rows therefore carry hashes of settings without ``init``:

- ``tdm_paper`` rows: the paper configuration, which pins ``init="mean"``; its behaviour did not
  change (the "mean" path draws the same random numbers as before), so only the key is updated;
- ``tdm`` rows: the tdm 0.1 default, now the pinned method ``tdm_mean_init``; they move there.

A row is changed only when its hash is exactly the hash of its configuration without ``init``.
Re-running is harmless. Check that behaviour is unchanged with
``python results/migrations/tdm_0_2_init.py --check DB`` (refits one recorded trial of each
configuration and compares its MAE bit for bit).

Run: ``.venv/bin/python results/migrations/tdm_0_2_init.py results/heldout/benchmark.duckdb``
"""

from __future__ import annotations

import argparse
import json

import duckdb

from schemas.benchmark import RESULTS_TABLE, TRACES_TABLE
from tdm.trial import effective_params, params_hash

MOVES = (("tdm_paper", "tdm_paper"), ("tdm", "tdm_mean_init"))


def _keys(new_method: str) -> tuple[str, str, str]:
    new = effective_params(new_method)
    if new.get("init") != "mean":
        raise SystemExit(f"{new_method}: expected init='mean', got {new.get('init')!r}")
    old = {k: v for k, v in new.items() if k != "init"}
    return params_hash(old), params_hash(new), json.dumps(new, sort_keys=True, default=str)


def migrate(db_path: str) -> None:
    with duckdb.connect(db_path) as con:
        con.execute("BEGIN TRANSACTION")
        for old_method, new_method in MOVES:
            old_hash, new_hash, new_json = _keys(new_method)
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


def check(db_path: str) -> None:
    from tdm.datasets import load_dataset
    from tdm.trial import run_trial

    with duckdb.connect(db_path, read_only=True) as con:
        for _, method in MOVES:
            # A row of tdm 0.1.1, the last version before ``init``: 0.1.0 solved the assignment
            # on unrounded costs, which can break near-ties differently (a different trajectory).
            row = con.execute(
                f'SELECT dataset, mechanism, seed, p, mae FROM "{RESULTS_TABLE}" '
                "WHERE method = ? AND tdm_version = '0.1.1' "
                "ORDER BY dataset, mechanism, seed LIMIT 1",
                [method],
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("db", nargs="+")
    parser.add_argument("--check", action="store_true", help="refit one trial per method")
    args = parser.parse_args()
    for path in args.db:
        (check if args.check else migrate)(path)
