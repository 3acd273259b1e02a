"""The deployments of a prefect.yaml, as `tdm serve` reads them: names, entrypoints, schedules,
parameters, and the environment their runs get (`work_pool.job_variables.env`)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deployments.files import PREFECT_FILE
from schemas.warehouse import yaml_problem
from tasks.errors import PipelineError

if TYPE_CHECKING:
    from prefect.schedules import Schedule

__all__ = ["DeploymentSpec", "WorkPoolSpec", "read_deployment_specs"]


class WorkPoolSpec(BaseModel):
    """A deployment's `work_pool`: where `prefect deploy` puts it, and its runs' variables."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str | None = None
    job_variables: dict[str, Any] = Field(default_factory=dict)


class DeploymentSpec(BaseModel):
    """One entry of prefect.yaml's `deployments`, the fields a served deployment takes."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(min_length=1)
    entrypoint: str = Field(pattern=r"^[\w./-]+\.py:\w+$")
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    schedules: list[dict[str, Any]] = Field(default_factory=list)
    concurrency_limit: int | None = Field(default=None, ge=1)
    work_pool: WorkPoolSpec | None = None

    def run_environment(self) -> dict[str, str]:
        """The environment variables its runs get (`work_pool.job_variables.env`), as text."""
        env = (self.work_pool.job_variables.get("env") if self.work_pool else None) or {}
        if not isinstance(env, dict):
            raise PipelineError(
                f"Deployment {self.name!r}: work_pool.job_variables.env must map variable names "
                f"to values; got {env!r}."
            )
        return {str(name): str(value) for name, value in env.items()}

    def schedule_objects(self) -> list[Schedule]:
        """The schedules as Prefect `Schedule`s (cron, interval in seconds, or rrule)."""
        from prefect.schedules import Schedule

        built = []
        for item in self.schedules:
            fields = {k: v for k, v in item.items() if k != "replaces"}
            if isinstance(fields.get("interval"), int | float):
                fields["interval"] = timedelta(seconds=fields["interval"])
            try:
                built.append(Schedule(**fields))
            except (TypeError, ValueError) as error:
                raise PipelineError(
                    f"Deployment {self.name!r}: invalid schedule {item}: {error}"
                ) from None
        return built


def read_deployment_specs(path: str | Path = PREFECT_FILE) -> list[DeploymentSpec]:
    """The deployments listed in a prefect.yaml; errors name the file and the entry."""
    where = Path(path)
    try:
        raw = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
        entries = raw.get("deployments") or []
    except yaml.YAMLError as error:
        raise PipelineError(f"'{where}' is not valid YAML: {yaml_problem(error)}.") from None
    except (OSError, AttributeError, ValueError) as error:
        raise PipelineError(f"Cannot read the deployments in '{where}': {error}") from None
    if not isinstance(entries, list):
        raise PipelineError(f"'{where}': deployments must be a list of entries; got {entries!r}.")
    specs = []
    for number, entry in enumerate(entries, start=1):
        try:
            specs.append(DeploymentSpec.model_validate(entry))
        except ValidationError as error:
            name = entry.get("name") if isinstance(entry, dict) else None
            which = f"deployment {number}" + (f" ({name})" if isinstance(name, str) else "")
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: "
                f"{str(e['msg']).removeprefix('Value error, ')}"
                for e in error.errors()
            )
            raise PipelineError(f"Invalid {which} in '{where}': {problems}.") from None
    return specs
