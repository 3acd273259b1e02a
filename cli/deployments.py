"""`tdm serve` and `tdm run`: serve the deployments, and trigger the ad-hoc one from anywhere.

`add_deployment_commands(subparsers)` registers both on the `tdm` parser (`cli.main`), whose
`main` turns a `PipelineError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from cli.arguments import add_columns_flag, add_key_flag, add_replace_target_flag, parse_positive
from deployments.server import DEFAULT_PORT, api_url_for

__all__ = ["add_deployment_commands"]


def add_deployment_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register `serve` and `run` on the `tdm` parser's sub-commands, with their handlers."""
    serve = subparsers.add_parser(
        "serve",
        help="serve the deployments (nightly impute-warehouse, ad-hoc impute-table)",
        description="Serve the deployments of deployments/prefect.yaml from this process until "
        "Ctrl-C, against PREFECT_API_URL or, when it is unset, against a Prefect server (and "
        "UI) started on 127.0.0.1:PORT for as long as this runs. Run it from the repository "
        "root: relative paths in parameters are taken from the working directory.",
    )
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port of that server [{DEFAULT_PORT}]"
    )
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
        f"serves, on PREFECT_API_URL or else {api_url_for(DEFAULT_PORT)}, and wait for it: "
        "exit 0 when it completes, 1 when it fails. Settings not given are the serving "
        "process's (its TDM_* variables, then the defaults).",
    )
    run.add_argument("table", metavar="TABLE", help="source table")
    run.add_argument("--db", help="DuckDB file, as the serving process sees it [its TDM_DB_PATH]")
    run.add_argument("--target", help="target table [TABLE + TDM_TARGET_SUFFIX (_imputed)]")
    add_columns_flag(run)
    add_key_flag(run)
    add_replace_target_flag(run)
    run.add_argument(
        "--max-iter",
        type=parse_positive,
        help="training iterations (the run's other imputer settings stay the serving "
        "process's TDM_* values) [its TDM_MAX_ITER]",
    )
    run.add_argument("--seed", type=int, help="random seed [its TDM_SEED]")
    run.add_argument(
        "--no-wait", dest="wait", action="store_false", help="return once the run is created"
    )
    run.set_defaults(handler=_run)


def _serve(args: argparse.Namespace) -> int:
    from deployments.serve import serve_here

    serve_here(port=args.port, gpu_slots=args.gpu_slots, limit=args.limit)
    return 0


def _run(args: argparse.Namespace) -> int:
    from deployments.trigger import TABLE_DEPLOYMENT, trigger_deployment

    given = {
        "source_table": args.table,
        "db_path": args.db,
        "target_table": args.target,
        "columns": args.columns,
        "key": args.key,
        "replace_target": args.replace_target,
        "imputer": {"max_iter": args.max_iter} if args.max_iter is not None else None,
        "seed": args.seed,
    }
    parameters = {name: value for name, value in given.items() if value is not None}
    try:
        run = trigger_deployment(TABLE_DEPLOYMENT, parameters, wait=args.wait)
    except KeyboardInterrupt:
        print("tdm run: stopped waiting; the run goes on (see the Prefect UI).", file=sys.stderr)
        return 130
    print(f"Flow run {run.name!r} of {run.deployment}: {run.state}. {run.url}", flush=True)
    if not run.final:
        return 0
    if not run.succeeded:
        print(f"tdm run: {run.message or run.state}", file=sys.stderr)
        return 1
    for report in run.reports:
        print(report)
    return 0
