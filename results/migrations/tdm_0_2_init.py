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

from _rekey import main

MOVES = (("tdm_paper", "tdm_paper"), ("tdm", "tdm_mean_init"))

if __name__ == "__main__":
    # --check refits rows of tdm 0.1.1, the last version before ``init``: 0.1.0 solved the
    # assignment on unrounded costs, which can break near-ties differently.
    checks = [(new, "0.1.1") for _, new in MOVES]
    main(__doc__, MOVES, "init", "mean", checks, later=("cell_lr_correction",))
