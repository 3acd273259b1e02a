"""What `tdm serve` changes in the deployments of prefect.yaml, as settings: the nightly run's
warehouse config and schedule, without editing a tracked file."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServeSettings"]


class ServeSettings(BaseSettings):
    """The nightly deployment's config and schedule; each field `name` reads `TDM_<NAME>`.

    Unset fields keep prefect.yaml's values. Precedence: `tdm serve` flags > environment >
    prefect.yaml.
    """

    model_config = SettingsConfigDict(env_prefix="TDM_", frozen=True, extra="ignore")

    warehouse_config: Path | None = Field(
        default=None,
        description="The warehouse config (tables, and optionally db_path) the nightly run "
        "imputes; relative paths are taken from where `tdm serve` runs.",
    )
    schedule_cron: str | None = Field(
        default=None,
        min_length=1,
        description="When the nightly run starts, as a cron expression (minute hour day month "
        "weekday), e.g. '30 3 * * *' for 03:30.",
    )
    schedule_timezone: str | None = Field(
        default=None,
        min_length=1,
        description="The time zone of the cron expression (an IANA name such as Europe/Berlin).",
    )
