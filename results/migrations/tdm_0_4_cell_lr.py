"""Re-key the TDM trials recorded before ``TDMImputer(cell_lr_correction=...)`` existed
(tdm 0.3 -> 0.4).

tdm 0.4 added the setting ``cell_lr_correction`` (True, the new default, or False: every missing
cell at the rate ``lr``, what every earlier fit did). Earlier rows carry hashes of settings
without it:

- ``tdm_paper``, ``tdm_mean_init`` and ``tdm_ice_init`` pin ``cell_lr_correction=False``; their
  behaviour did not change (the same rate, the same random numbers), so only the key is updated;
- ``tdm`` rows: tdm 0.3's default, now the pinned method ``tdm_fixed_cell_lr``; they move there.

A row is changed only when its hash is exactly the hash of its configuration without the
setting. Re-running is harmless. ``--check DB`` refits one trial of each configuration recorded
by the last version that ran it (0.3.0 for ``tdm``, 0.2.0 for the others) and compares its MAE
bit for bit.

Run: ``.venv/bin/python results/migrations/tdm_0_4_cell_lr.py results/heldout/benchmark.duckdb``
"""

from __future__ import annotations

from _rekey import main

MOVES = (
    ("tdm_paper", "tdm_paper"),
    ("tdm_mean_init", "tdm_mean_init"),
    ("tdm_ice_init", "tdm_ice_init"),
    ("tdm", "tdm_fixed_cell_lr"),
)

if __name__ == "__main__":
    checks = [(new, "0.3.0" if old == "tdm" else "0.2.0") for old, new in MOVES]
    main(__doc__, MOVES, "cell_lr_correction", False, checks)
