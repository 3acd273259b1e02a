"""`tdm models list|show|drop`: the model store (`tdm_models`) of a warehouse file."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasks.warehouse.models import ModelFolder

__all__ = ["add_models_command"]


def add_models_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `models` and its `list`, `show` and `drop` actions on the `tdm` parser."""
    models = subparsers.add_parser(
        "models",
        help="list, show or drop the models stored by incremental runs (tdm_models)",
        description="The fitted models incremental runs (`tdm impute --incremental`) keep in "
        "the warehouse's tdm_models table, one version per fit, named by their target table.",
    )
    actions = models.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every stored version, one line each")
    show = actions.add_parser("show", help="one version: columns, settings, fit data, drift base")
    drop = actions.add_parser(
        "drop",
        help="delete a target's versions: every one (the next incremental run fits a new "
        "model) or --version N (the next run uses the newest one left, as its refit rules "
        "allow); numbers are not reused",
    )
    for parser in (listing, show, drop):
        parser.add_argument(
            "--db", type=Path, help="DuckDB file [env TDM_DB_PATH; warehouse.duckdb]"
        )
    for parser in (show, drop):
        parser.add_argument("--target", required=True, help="the target table the model imputes")
        parser.add_argument("--version", type=int, help="one version [show: the newest; drop: all]")
    models.set_defaults(handler=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    from flows.settings import PipelineSettings
    from tasks.warehouse.access import check_writable
    from tasks.warehouse.models import list_models, model_folder
    from tasks.warehouse.tables import connect

    settings = PipelineSettings.from_env()
    db = args.db if args.db is not None else settings.db_path
    if args.action == "drop":
        check_writable(db, refused="No model was dropped")
        return _drop(args, db, model_folder(db, settings.model_dir))
    with connect(db, read_only=True) as con:
        models = list_models(con, getattr(args, "target", None))
    if args.action == "list":
        if not models:
            print(f"No stored model in {db}.")
        for m in models:
            print(
                f"{m.target_table}  v{m.version}  from {m.source_table}  "
                f"{m.created_at:%Y-%m-%d %H:%M}  {m.fit_rows} fit rows  tdm {m.tdm_version}  "
                + (f"file {m.model_path}" if m.model_path else f"{m.model_bytes / 1e6:.2f} MB")
                + f"  run {m.run_id}"
            )
        return 0
    chosen = [m for m in models if args.version in (None, m.version)]
    if not chosen:
        raise _none_stored(args, db)
    # the columns of `tdm_models`, by their names there, but the model's scaling
    details = {name: value for name, value in asdict(chosen[-1]).items() if name != "scaling"}
    print(json.dumps(details, indent=2, default=str))
    return 0


def _drop(args: argparse.Namespace, db: Path, folder: ModelFolder | None) -> int:
    """`tdm models drop`: the versions deleted, and what the next incremental run will use."""
    from tasks.warehouse.models import drop_models, latest_model, next_model_version
    from tasks.warehouse.tables import connect

    with connect(db, read_only=False) as con:
        dropped = drop_models(con, args.target, args.version, folder=folder)
        if not dropped:
            raise _none_stored(args, db)
        left = latest_model(con, args.target)
        then = (
            f"uses version {left.version}, the newest left, unless its age, the new rows' "
            "drift or a stored model it cannot use (its file missing or altered) calls for a refit"
            if left is not None
            else f"fits a new model, stored as version {next_model_version(con, args.target)}"
        )
    which = f"version {args.version}" if args.version is not None else "every version"
    print(
        f"Dropped {dropped} stored model(s) of {args.target!r} ({which}) from {db}; its next "
        f"incremental run {then}."
    )
    return 0


def _none_stored(args: argparse.Namespace, db: Path) -> Exception:
    """The error for a `--target` (and `--version`) that matches no stored model."""
    from tasks.errors import PipelineInputError

    return PipelineInputError(
        f"No stored model of {args.target!r}"
        + (f" with version {args.version}" if args.version is not None else "")
        + f" in {db}; `tdm models list` shows those there are."
    )
