"""`tdm serve` and `tdm run`: serve the deployments, and trigger the ad-hoc one from anywhere.

`add_deployment_commands(subparsers)` registers both on the `tdm` parser (`cli.main`), whose
`main` turns a `PipelineError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cli.arguments import (
    add_column_flags,
    add_draw_flags,
    add_incremental_flags,
    add_key_flag,
    add_replace_target_flag,
    add_torch_threads_flag,
    parse_count,
    parse_port,
    parse_positive,
    parse_seconds,
    torch_threads_setting,
)
from cli.console import QUIET, add_verbosity_flags, served_log_line
from cli.errors import EXIT_INTERRUPTED
from deployments.server import DEFAULT_PORT, api_url_for

if TYPE_CHECKING:
    from prefect.client.schemas.objects import Log

__all__ = ["EXIT_TIMEOUT", "add_deployment_commands", "print_reports"]

EXIT_TIMEOUT = 124
"""Exit status of `tdm run` when its --timeout passed (as timeout(1)'s)."""


def add_deployment_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register `serve` and `run` on the `tdm` parser's sub-commands, with their handlers."""
    serve = subparsers.add_parser(
        "serve",
        help="serve the deployments (nightly impute-warehouse, ad-hoc impute-table)",
        description="Serve the deployments of deployments/prefect.yaml from this process until "
        "Ctrl-C, against PREFECT_API_URL or, when it is unset, against a Prefect server (and "
        "UI) started on 127.0.0.1:PORT for as long as this runs. The runs execute in "
        "subprocesses with this process's environment and working directory: relative paths "
        "are taken from here. Settings: flag > TDM_* variable > prefect.yaml.",
    )
    serve.add_argument(
        "--port",
        type=parse_port,
        help=f"port of that server [env PREFECT_SERVER_API_PORT; {DEFAULT_PORT}]",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="warehouse config (tables, optionally db_path) of the nightly run "
        "[env TDM_WAREHOUSE_CONFIG; deployments/warehouse.yaml]",
    )
    serve.add_argument(
        "--db",
        type=Path,
        help="DuckDB file of every served run; beats the config's db_path "
        "[env TDM_DB_PATH; the config's db_path, else warehouse.duckdb]",
    )
    serve.add_argument(
        "--schedule-cron",
        metavar="CRON",
        help="when the nightly run starts, e.g. '30 3 * * *' [env TDM_SCHEDULE_CRON; '0 2 * * *']",
    )
    serve.add_argument(
        "--schedule-timezone",
        metavar="ZONE",
        help="time zone of that cron, e.g. Europe/Berlin [env TDM_SCHEDULE_TIMEZONE; UTC]",
    )
    add_torch_threads_flag(serve)
    serve.add_argument(
        "--gpu-slots",
        type=parse_positive,
        metavar="N",
        help="GPU imputations at once: the tag concurrency limit 'gpu', created when missing "
        "[1; an existing limit is changed only when this is given]",
    )
    serve.add_argument(
        "--limit", type=parse_positive, metavar="N", help="flow runs executing at once [no cap]"
    )
    serve.set_defaults(handler=_serve)

    run = subparsers.add_parser(
        "run",
        help="impute a table with the served impute-table deployment",
        description="Create a run of the impute-table deployment that `tdm serve` (or a worker) "
        f"serves, on PREFECT_API_URL or else {api_url_for(DEFAULT_PORT)} (the port: "
        "PREFECT_SERVER_API_PORT), print its address in the UI, its state changes and its log "
        "lines as they come (as `tdm impute` prints its own), and wait for it: exit 0 when it "
        f"completes, 1 when it fails, 2 when nothing serves it, {EXIT_TIMEOUT} when --timeout "
        "passes. A run nobody takes up within 30 s, or still going at --timeout, is cancelled: "
        "it never starts later. Settings not given are the serving process's (its TDM_* "
        "variables, then the defaults).",
    )
    run.add_argument("table", metavar="TABLE", help="source table")
    run.add_argument("--db", help="DuckDB file, as the serving process sees it [its TDM_DB_PATH]")
    run.add_argument("--target", help="target table [TABLE + TDM_TARGET_SUFFIX (_imputed)]")
    add_column_flags(run)
    add_key_flag(run)
    add_replace_target_flag(run)
    add_incremental_flags(run)
    run.add_argument(
        "--max-iter",
        type=parse_count,
        help="training iterations, 0: the start alone (the run's other imputer settings stay "
        "the serving process's TDM_* values) [its TDM_MAX_ITER]",
    )
    run.add_argument("--seed", type=int, help="random seed [its TDM_SEED]")
    add_draw_flags(run, whose="its ")
    run.add_argument(
        "--timeout",
        type=parse_seconds,
        metavar="SECONDS",
        help="stop waiting after this long and cancel the run [no limit]",
    )
    run.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="return once a runner has taken the run (or queued it)",
    )
    add_verbosity_flags(run)
    run.set_defaults(handler=_run)


def _serve(args: argparse.Namespace) -> int:
    from deployments.serve import ServeSettings, serve_here

    given = {
        "warehouse_config": args.config,
        "schedule_cron": args.schedule_cron,
        "schedule_timezone": args.schedule_timezone,
    }
    settings = ServeSettings(**{k: v for k, v in given.items() if v is not None})
    serve_here(
        port=args.port,
        gpu_slots=args.gpu_slots,
        limit=args.limit,
        settings=settings,
        torch_threads=torch_threads_setting(args.torch_threads),
        db_path=args.db.resolve() if args.db is not None else None,
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    from deployments.trigger import (
        TABLE_DEPLOYMENT,
        CreatedRun,
        target_api_url,
        trigger_deployment,
    )

    given = {
        "source_table": args.table,
        "db_path": args.db,
        "target_table": args.target,
        "columns": args.columns,
        "pass_through": args.pass_through,
        "key": args.key,
        "replace_target": args.replace_target,
        "imputer": {"max_iter": args.max_iter} if args.max_iter is not None else None,
        "seed": args.seed,
        "fill": args.fill,
        "draws": args.draws,
        "incremental": args.incremental or None,
        "watermark": args.watermark,
        "refit": args.refit or None,
    }
    parameters = {name: value for name, value in given.items() if value is not None}
    created: list[CreatedRun] = []

    def show_created(run: CreatedRun) -> None:
        created.append(run)
        print(f"Flow run {run.name!r} of {run.deployment}: {run.url}", flush=True)

    def show(line: str) -> None:
        if args.verbosity > QUIET:
            print(f"  {line}", flush=True)

    def show_log(log: Log) -> None:
        when = log.timestamp.astimezone().strftime("%H:%M:%S")
        line = served_log_line(log.level, log.message, when, args.verbosity)
        if line is not None:
            show(line)

    try:
        run = trigger_deployment(
            TABLE_DEPLOYMENT,
            parameters,
            run_name=f"impute-{args.table}",  # as the flow names its runs
            wait=args.wait,
            timeout=args.timeout,
            on_created=show_created,
            progress=show,
            on_log=show_log,
        )
    except KeyboardInterrupt:
        # The API the run lives on: unset, `prefect` would start a temporary server of its own.
        api = f"PREFECT_API_URL={target_api_url()}"
        cancel = ""
        if created:
            cancel = f" (to cancel it: {api} prefect flow-run cancel {created[0].id})"
        print(f"tdm run: stopped waiting; the run goes on{cancel}.", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"Flow run {run.name!r} of {run.deployment}: {run.state}. {run.url}", flush=True)
    if run.timed_out:
        print(
            f"tdm run: stopped waiting after {args.timeout:g} s (--timeout) and cancelled the "
            f"run (now {run.state}), so that it cannot start later; a cancelled run writes "
            "nothing (each table is written in one transaction).",
            file=sys.stderr,
        )
        return EXIT_TIMEOUT
    if not run.final:
        return 0
    if not run.succeeded:
        print(f"tdm run: {run.message or run.state}", file=sys.stderr)
        return 1
    print_reports(run.reports)
    return 0


def print_reports(reports: Iterable[str]) -> None:
    """A run's reports (markdown), each in full after a blank line: `tdm run` and `tdm impute`
    print them alike."""
    for report in reports:
        print(f"\n{report}")
