"""Where the deployments' files are: prefect.yaml, and the warehouse config run by default."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PREFECT_FILE", "WAREHOUSE_CONFIG"]

PREFECT_FILE = Path(__file__).with_name("prefect.yaml")
"""The deployments, their schedules and parameters (read by `tdm serve` and `prefect deploy`)."""

WAREHOUSE_CONFIG = "deployments/warehouse.yaml"
"""The warehouse config of the nightly deployment and of `tdm warehouse` unless told otherwise,
relative to the working directory (the repository root)."""
