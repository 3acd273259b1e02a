"""The `tdm` command: `impute`, `demo` and `warehouse` run flows here; `bench`, `serve`, `run`,
`models` and `records` are registered from their own modules (`benchmarks.cli`,
`cli.deployments`, `cli.models`, `cli.records`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from cli.arguments import (
    EXIT_USAGE,
    add_column_flags,
    add_draw_flags,
    add_incremental_flags,
    add_key_flag,
    add_replace_target_flag,
    add_torch_threads_flag,
    limit_torch_threads,
    parse_share,
    split_required_names,
    torch_threads_setting,
)
from cli.console import DEFAULT, QUIET, add_verbosity_flags, quiet_children, show_logs

__all__ = ["build_parser", "main", "missing_pipeline_packages"]

_RUNS_FLOWS_HERE = ("impute", "demo", "warehouse", "bench")
"""The commands that run flows in this process (on a temporary server when no API is set)."""


INTERRUPT_GRACE_SECONDS = 15.0
"""How long a command that runs flows may take to stop after a Ctrl-C before it is ended."""


class Terminated(KeyboardInterrupt):
    """A SIGTERM (systemd, `docker stop`, Kubernetes), which stops a command as a Ctrl-C does."""


def _stopped_by(error: KeyboardInterrupt) -> tuple[str, int]:
    """How a command was stopped, in words, and its exit status (128 + the signal)."""
    if isinstance(error, Terminated):
        return "terminated (SIGTERM)", 128 + signal.SIGTERM
    return "interrupted", 128 + signal.SIGINT


@contextlib.contextmanager
def _ended_after_interrupt(command: str) -> Iterator[None]:
    """Within it, a Ctrl-C (SIGINT) raises KeyboardInterrupt as usual, a SIGTERM `Terminated`,
    and, should the command not have ended `INTERRUPT_GRACE_SECONDS` after the first, the
    process ends with exit status 128 + the signal. Such an exception raised inside a
    finaliser, where Python ignores it, is raised again. A Ctrl-C that lands inside an HTTP
    call to Prefect's API can leave the connection pool's lock held, and the crash report
    Prefect then sends waits on it for ever. The warehouse is safe: each write is one
    transaction. Only in the main thread (where signals are handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(how: str, status: int) -> None:
        print(
            f"tdm {command}: {how}, and not stopped {INTERRUPT_GRACE_SECONDS:g} s later: "
            "ended. Each table is written in one transaction: a table not reported written is "
            "as it was.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(status)

    timers: list[threading.Timer] = []

    def stopped(signum: int, frame: object) -> None:
        error = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        if not timers:  # counted from the first signal
            timers.append(threading.Timer(INTERRUPT_GRACE_SECONDS, end, _stopped_by(error)))
            timers[0].daemon = True
            timers[0].start()
        raise error

    active = [True]
    main = threading.main_thread().ident
    assert main is not None

    def again(signum: int) -> None:
        if active[0]:
            signal.pthread_kill(main, signum)

    previous_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt):  # raised in a finaliser, which Python
            signum = signal.SIGTERM if isinstance(info.exc_value, Terminated) else signal.SIGINT
            again_soon = threading.Timer(0.1, again, (signum,))  # ignores: sent again, to land
            again_soon.daemon = True  # outside it
            again_soon.start()
            return
        previous_hook(info)

    previous = {sig: signal.signal(sig, stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        active[0] = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = previous_hook


def missing_pipeline_packages() -> list[str]:
    """The distributions of tdm-impute's `pipeline` extra that are not installed, by their names
    in its metadata; none where tdm-impute itself is not installed (run from a source tree)."""
    try:
        requirements = metadata.requires("tdm-impute") or []
    except metadata.PackageNotFoundError:
        return []
    missing = []
    for requirement in requirements:
        name, _, marker = requirement.partition(";")
        if not re.search(r"""\bextra\s*==\s*['"]pipeline['"]""", marker):
            continue
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", name)
        if found is None:
            continue
        try:
            metadata.distribution(found.group(1))
        except metadata.PackageNotFoundError:
            missing.append(found.group(1))
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tdm` command line; returns the exit status."""
    missing = missing_pipeline_packages()
    if missing:  # a library-only install: say what to install, not which import failed
        print(
            f"tdm: the command line needs tdm-impute's pipeline extra, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed here: pip install "
            "'tdm-impute[pipeline]' ('.[pipeline]' in a clone). The library (`import tdm`) "
            "needs none of them.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if getattr(args, "handler", None) is _no_benchmark:
        return _no_benchmark(args)  # whatever its arguments: the benchmark is not here
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # Before Prefect reads its settings: the temporary server it starts when no PREFECT_API_URL is
    # set sends no telemetry unless asked to, and gets time to start on a busy machine (Prefect's
    # default is 20 s; `_run_handler` waits as long again once).
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault(_STARTUP_SETTING, "120")

    from pydantic import ValidationError

    from cli.errors import (
        EXIT_UNEXPECTED,
        ErrorLog,
        configure_warnings,
        drop_output_after_closed_pipe,
        interrupted_message,
    )
    from tasks.errors import PipelineError, release_error, validation_problems

    verbosity = getattr(args, "verbosity", DEFAULT)
    restore_warnings = configure_warnings(quiet=verbosity == QUIET)
    restore_stdout = drop_output_after_closed_pipe()
    if args.command in _RUNS_FLOWS_HERE:
        from deployments.lifeline import tie_ephemeral_server

        tie_ephemeral_server()  # Prefect's temporary server dies with this process, even on KILL
    log = ErrorLog(args.command)
    log.attach(expected=PipelineError)  # tracebacks go to the log file, never the console
    show_logs(verbosity)
    restore_children = quiet_children(verbosity)  # after this process's logging is set up
    started = datetime.now(UTC)
    guard = (
        _ended_after_interrupt(args.command)
        if args.command in _RUNS_FLOWS_HERE
        else contextlib.nullcontext()
    )
    try:
        with guard:
            return _run_handler(args)
    except (PipelineError, *_failed_run()) as error:
        # A foreseen failure; or Prefect's FailedRun, when the client re-sent a flow's Failed
        # state after a lost answer and the server's copy came back without its error.
        release_error(error)
        print(f"tdm {args.command}: error: {error}", file=sys.stderr)
        # some tables failed for a reason not foreseen, or a traceback was logged during the run
        if getattr(error, "unexpected", False) or (
            not isinstance(error, PipelineError) and log.path.exists()
        ):
            print(f"The tracebacks are in {log.path}.", file=sys.stderr)
            return EXIT_UNEXPECTED
        return EXIT_USAGE
    except ValidationError as error:
        release_error(error)
        problems = validation_problems(error)
        print(f"tdm {args.command}: error: invalid setting: {problems}.", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:  # a bug or an unforeseen input: one paragraph, traceback logged
        if str(error).startswith(_SERVER_TIMEOUT):  # a busy machine, not a bug: nothing ran
            release_error(error)
            print(f"tdm {args.command}: error: {_server_timeout_message()}", file=sys.stderr)
            return EXIT_UNEXPECTED
        message = log.unexpected(args.command, error)
        release_error(error)
        print(message, file=sys.stderr)
        return EXIT_UNEXPECTED
    except KeyboardInterrupt as error:
        release_error(error)
        how, status = _stopped_by(error)
        if args.command == "bench":  # trials are recorded one by one, not a table at the end
            from benchmarks.cli import grid_settings

            print(
                f"tdm bench: {how}. Each finished trial is recorded in "
                f"'{grid_settings(args).db}'; the same command runs only the others.",
                file=sys.stderr,
            )
        else:
            message = interrupted_message(args.command, _written_db(args), started, how=how)
            print(message, file=sys.stderr)
        return status
    finally:
        log.detach()
        restore_warnings()
        restore_children()
        restore_stdout()


_SERVER_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"
"""How Prefect's error begins when its temporary server did not answer in time."""

_STARTUP_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


def _run_handler(args: argparse.Namespace) -> int:
    """The command's handler; run once more when Prefect's temporary server did not start in
    time (a busy machine: its first client call failed, so nothing ran), the slow server
    stopped first."""
    try:
        return int(args.handler(args))
    except RuntimeError as error:
        if not str(error).startswith(_SERVER_TIMEOUT):
            raise
    from deployments.lifeline import stop_ephemeral_server

    stop_ephemeral_server()
    print(
        f"tdm {args.command}: the temporary Prefect server did not start within "
        f"{_startup_seconds()} s ({_STARTUP_SETTING}); trying once more.",
        file=sys.stderr,
        flush=True,
    )
    return int(args.handler(args))


def _startup_seconds() -> int:
    from prefect.settings import get_current_settings

    return get_current_settings().server.ephemeral.startup_timeout_seconds


def _server_timeout_message() -> str:
    return (
        f"the temporary Prefect server did not start within {_startup_seconds()} s, twice "
        f"({_STARTUP_SETTING}), so nothing ran and nothing was written; the machine is likely "
        "busy. Run again, set that variable higher, or start one server (`tdm serve`, or "
        "`prefect server start`) and point PREFECT_API_URL at it."
    )


def _failed_run() -> tuple[type[BaseException], ...]:
    """Prefect's FailedRun when Prefect has been imported (only then can it be raised)."""
    exceptions = sys.modules.get("prefect.exceptions")
    return (exceptions.FailedRun,) if exceptions is not None else ()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one sub-command per job (impute, demo, bench, serve, run)."""
    parser = argparse.ArgumentParser(
        prog="tdm",
        description="Impute missing values in DuckDB tables with Transformed Distribution "
        "Matching, as Prefect flows with validation, quality checks and lineage.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    impute = commands.add_parser(
        "impute",
        help="impute a DuckDB table into a new table",
        description="Impute the missing cells of a table (numbers within bounds, integers as "
        "integers, text, enum and boolean columns with observed labels) and write the result "
        "to a new table, with a lineage row in tdm_lineage. Settings not given as flags come "
        "from TDM_* environment variables, then from the defaults.",
    )
    impute.add_argument("--db", type=Path, help="DuckDB file [env TDM_DB_PATH; warehouse.duckdb]")
    impute.add_argument("--table", required=True, help="source table")
    impute.add_argument("--target", help="target table [SOURCE + TDM_TARGET_SUFFIX (_imputed)]")
    add_column_flags(impute)
    impute.add_argument(
        "--column",
        dest="columns",
        action="append",
        metavar="NAME",
        help="one column to impute, taken verbatim (for names with commas); repeatable",
    )
    add_key_flag(impute)
    impute.add_argument(
        "--replace-source",
        action="store_true",
        help="update the source table's missing cells in place (its definition is kept)",
    )
    add_replace_target_flag(impute)
    impute.add_argument(
        "--nan-as-missing",
        dest="nan_as_missing",
        action=argparse.BooleanOptionalAction,
        help="impute the NaN values of FLOAT and DOUBLE columns as missing cells; without it a "
        "column to impute that holds NaN (a value in DuckDB, not NULL) is refused "
        "[env TDM_NAN_AS_MISSING; false]",
    )
    _add_dry_run_flag(impute)
    add_draw_flags(impute)
    add_incremental_flags(impute)
    add_verbosity_flags(impute)
    _add_run_flags(impute)
    impute.set_defaults(handler=_run_impute)

    demo = commands.add_parser(
        "demo",
        help="build a demo warehouse and impute it",
        description="Write scikit-learn's wine data, with missing cells, to a DuckDB file, impute "
        "it with the impute-table flow, and compare with mean imputation.",
    )
    from cli.demo import DEMO_DB_PATH

    demo.add_argument(
        "--db", type=Path, default=DEMO_DB_PATH, help=f"demo DuckDB file [{DEMO_DB_PATH}]"
    )
    demo.add_argument(
        "--missing-rate",
        type=parse_share,
        default=0.25,
        help="share of numeric cells and of cultivar labels removed [0.25]",
    )
    add_verbosity_flags(demo)
    _add_run_flags(demo, torch_threads="1 for the demo")
    demo.set_defaults(handler=_run_demo)

    warehouse = commands.add_parser(
        "warehouse",
        help="impute every table a config lists (the impute-warehouse flow), here and now",
        description="Run the impute-warehouse flow in this process: every table listed in the "
        "YAML config, imputations on a thread pool or a Dask cluster, each table written in "
        "its own transaction. Settings not given as flags come from TDM_* variables.",
    )
    from deployments.files import WAREHOUSE_CONFIG

    warehouse.add_argument(
        "--config",
        default=os.environ.get("TDM_WAREHOUSE_CONFIG") or None,
        help=f"[env TDM_WAREHOUSE_CONFIG; {WAREHOUSE_CONFIG}]",
    )
    warehouse.add_argument(
        "--db", type=Path, help="DuckDB file [env TDM_DB_PATH; the config's db_path]"
    )
    warehouse.add_argument(
        "--task-runner", choices=["threads", "dask"], help="[env TDM_TASK_RUNNER; threads]"
    )
    warehouse.add_argument(
        "--dask-address", help="scheduler of an existing Dask cluster [a local cluster]"
    )
    warehouse.add_argument(
        "--tables",
        type=split_required_names,
        action="extend",
        help="only these tables of the config, comma-separated (as after a run where they "
        "failed) [every table it lists]",
    )
    warehouse.add_argument(
        "--refit",
        action="store_true",
        help="fit every table now: whole tables even when unchanged since their last run, "
        "incremental ones a new model version",
    )
    add_replace_target_flag(warehouse)
    add_draw_flags(warehouse)
    add_torch_threads_flag(warehouse)
    _add_dry_run_flag(warehouse)
    add_verbosity_flags(warehouse)
    warehouse.set_defaults(handler=_run_warehouse)

    _add_bench_command(commands)
    add_verbosity_flags(commands.choices["bench"])
    from cli.deployments import add_deployment_commands
    from cli.models import add_models_command
    from cli.records import add_records_command

    add_deployment_commands(commands)
    add_models_command(commands)
    add_records_command(commands)
    return parser


def _add_bench_command(commands: Any) -> None:
    """`tdm bench`: the paper's benchmark, a package of the repository, not of the installed
    wheel. From a clone (an editable install) it is put on the import path; elsewhere the command
    says where it lives."""
    root = Path(__file__).resolve().parent.parent
    if (root / "benchmarks" / "__init__.py").is_file() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from benchmarks.cli import add_bench_command
    except ImportError:
        bench = commands.add_parser(
            "bench",
            help="the paper's benchmark (from a clone only)",
            description=_NOT_INSTALLED,
        )
        bench.set_defaults(handler=_no_benchmark)
        return
    add_bench_command(commands)


_NOT_INSTALLED = (
    "The paper's benchmark is not part of the installed package; run it from a clone of the "
    "repository (./dev.sh setup, then .venv/bin/tdm bench)."
)
"""What `tdm bench` says where `benchmarks/` is not installed (a wheel)."""


def _no_benchmark(args: argparse.Namespace) -> int:
    """Any `tdm bench` command line, its arguments unread, where the benchmark is absent."""
    print(f"tdm bench: error: {_NOT_INSTALLED}", file=sys.stderr)
    return EXIT_USAGE


def _add_dry_run_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="fit and check as a run would, report what it would write, and write nothing "
        "(the DuckDB file is opened read-only)",
    )


_IMPUTER = "imputer_"
"""Prefix of the argparse destinations of the imputer's settings (kept apart from the run's)."""


def _add_run_flags(parser: argparse.ArgumentParser, **shown_defaults: str) -> None:
    """One flag per run setting and per imputer setting (TDMImputer's public parameters, read
    from the library), each named after its TDM_* variable."""
    from flows.settings import PipelineSettings
    from tasks.imputer_settings import parse_setting, setting_defaults

    group = parser.add_argument_group("run settings (flag > TDM_* variable > default)")
    for name in ("seed", "range_factor", "torch_threads"):
        field = PipelineSettings.model_fields[name]
        shown = shown_defaults.get(name, field.default)
        text = f"{field.description} [env TDM_{name.upper()}; {shown}]"
        kind = field.annotation if field.annotation in (int, float) else str
        group.add_argument(_flag(name), dest=name, type=kind, help=text.replace("%", "%%"))
    group = parser.add_argument_group(
        "imputer settings: TDMImputer's parameters, with the library's meaning and defaults "
        "(flag > TDM_* variable > default; none, true, false, numbers or text)"
    )
    for name, default in setting_defaults().items():
        shown = shown_defaults.get(name, "none" if default is None else default)
        text = f"TDMImputer's {name} [env TDM_{name.upper()}; {shown}]".replace("%", "%%")
        if isinstance(default, bool):
            group.add_argument(
                _flag(name),
                dest=_IMPUTER + name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=text,
            )
        else:
            group.add_argument(
                _flag(name),
                dest=_IMPUTER + name,
                type=parse_setting,
                default=argparse.SUPPRESS,
                metavar="VALUE",
                help=text,
            )


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _written_db(args: argparse.Namespace) -> str | None:
    """The DuckDB file the command writes to, as its run resolves it (None: not one that
    writes a warehouse only through its runs, as `demo`, which rebuilds its tables first, or
    its settings or config cannot be read)."""
    try:
        if args.command == "impute":
            return str(_settings(args).db_path)
        if args.command == "warehouse":
            from deployments.files import WAREHOUSE_CONFIG
            from flows.impute_warehouse import warehouse_db
            from flows.settings import PipelineSettings
            from schemas.warehouse import load_warehouse_config

            spec = load_warehouse_config(args.config or WAREHOUSE_CONFIG)
            return warehouse_db(args.db and str(args.db), spec, PipelineSettings.from_env())
    except Exception:  # a bad setting or config: the run failed on it before
        return None
    return None


def _settings(args: argparse.Namespace, **defaults: Any) -> Any:
    """The run's settings from the flags given, then TDM_* variables, then `defaults`, then
    built-ins."""
    from flows.settings import PipelineSettings

    given = {
        name: getattr(args, name)
        for name in PipelineSettings.model_fields
        if getattr(args, name, None) is not None
    }
    if getattr(args, "db", None) is not None:
        given["db_path"] = args.db
    from_env = PipelineSettings.from_env().model_fields_set
    for name, value in defaults.items():
        if name not in given and name not in from_env:
            given[name] = value
    return PipelineSettings(**given)


def _imputer(args: argparse.Namespace) -> dict[str, Any]:
    """The imputer settings given as flags (the flow puts them over the TDM_* variables)."""
    return {
        dest.removeprefix(_IMPUTER): value
        for dest, value in vars(args).items()
        if dest.startswith(_IMPUTER)
    }


_TABLE_FLAGS = (
    "columns",
    "key",
    "replace_source",
    "dry_run",
    "pass_through",
    "incremental",
    "watermark",
    "refit",
)
"""The `impute` flags the impute-table flow takes as they are, each as its parameter of the same
name."""

_RUN_PARAMETERS = ("replace_target", "nan_as_missing", "seed", "range_factor", "fill", "draws")
"""The run settings the impute-table flow takes as parameters, resolved here (flag > TDM_*
variable > default)."""


def _run_impute(args: argparse.Namespace) -> int:
    from uuid import UUID

    from cli.deployments import print_reports
    from deployments.trigger import run_reports
    from flows.impute_table import impute_table
    from flows.steps import DRY_RUN
    from tasks.imputer_settings import environment_settings, imputer_settings

    settings = _settings(args)
    # checked here too, so that a bad setting is refused before Prefect starts
    imputer_settings(environment_settings(), _imputer(args), subject="The imputer settings")
    limit_torch_threads(settings.torch_threads)
    result = impute_table(
        source_table=args.table,
        db_path=str(settings.db_path),
        target_table=args.target,
        imputer=_imputer(args),
        **{name: getattr(args, name) for name in _TABLE_FLAGS},
        **settings.model_dump(include=set(_RUN_PARAMETERS)),
    )
    _print_result(result)
    if result.status != DRY_RUN:  # a dry run publishes no report
        print_reports(run_reports(UUID(result.run_id)))
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from cli.demo import build_demo_warehouse, score_demo
    from flows.impute_table import impute_table

    settings = _settings(args, torch_threads=1)
    limit_torch_threads(settings.torch_threads)
    demo = build_demo_warehouse(
        settings.db_path, missing_rate=args.missing_rate, seed=settings.seed
    )
    print(
        f"Demo warehouse {demo.db_path}: table {demo.table!r}, {demo.rows} wines, "
        f"{len(demo.numeric_columns)} numeric columns with {demo.missing_cells} cells removed at "
        f"random ({args.missing_rate:.0%}), the text column {', '.join(demo.categorical_columns)} "
        f"with {demo.missing_labels} labels removed, complete columns "
        f"{', '.join(demo.pass_through_columns)}; the truth is in {demo.truth_table!r}.",
        flush=True,
    )
    result = impute_table(
        source_table=demo.table,
        db_path=str(demo.db_path),
        key=demo.key,
        imputer=_imputer(args),
        seed=settings.seed,
        range_factor=settings.range_factor,
    )
    _print_result(result)
    score = score_demo(demo, result.target_table)
    print(
        f"Mean absolute error on the {score.cells} removed cells (in column standard deviations):"
        f" TDM {score.mae_imputed:.3f}, mean imputation {score.mae_mean:.3f}."
    )
    print(
        f"Wrong labels among the {score.labels} removed {', '.join(demo.categorical_columns)} "
        f"labels: TDM {score.label_error_imputed:.1%}, the most frequent label "
        f"{score.label_error_mode:.1%}."
    )
    _print_where_to_look(
        result.db_path, result.target_table, result.run_id, result.unchanged_since or result.run_id
    )
    return 0


def _run_warehouse(args: argparse.Namespace) -> int:
    from deployments.files import WAREHOUSE_CONFIG
    from tasks.errors import PipelineError

    if args.config is None and not Path(WAREHOUSE_CONFIG).is_file():
        raise PipelineError(
            f"No warehouse config given, and the default one ({WAREHOUSE_CONFIG}, the "
            "repository's demo config) is not in this folder: pass --config FILE (or set "
            "TDM_WAREHOUSE_CONFIG), or run from the repository root."
        )
    flags = ("task_runner", "dask_address", "fill", "draws")
    given = {f"TDM_{flag.upper()}": getattr(args, flag) for flag in flags}
    from flows.impute_warehouse import WarehouseRunError, impute_warehouse
    from flows.settings import environment_set

    limit_torch_threads(torch_threads_setting(args.torch_threads))
    try:
        with environment_set({name: str(v) for name, v in given.items() if v is not None}):
            result = impute_warehouse(  # which reads those settings from the environment
                WAREHOUSE_CONFIG if args.config is None else args.config,
                db_path=str(args.db) if args.db else None,
                replace_target=args.replace_target,  # None: the flow reads TDM_REPLACE_TARGET
                dry_run=args.dry_run,
                tables=args.tables,
                refit=args.refit,
            )
    except WarehouseRunError as error:  # the tables written are said before the failures
        if error.result is not None and error.result.tables:
            _print_warehouse(error.result)
        raise
    _print_warehouse(result)
    return 0


def _print_warehouse(result: Any) -> None:
    """What a warehouse run wrote, a line per table (a paragraph each in a dry run), and its
    lineage run id; the tables left as their last run wrote them are counted apart, and the
    tables that failed are named (the error says why)."""
    from flows.steps import cells_per_column, describe_dry_run, describe_increment

    done = len(result.tables)
    left = sum(table.unchanged_since is not None for table in result.tables.values())
    tables = f"{done} table{'s' * (done != 1)}"
    if result.failed or left:  # "3 of 10 tables ..., left 7 as their last run wrote them"
        tables = f"{done - left} of {done + len(result.failed)} tables"
    failed = f" ({', '.join(result.failed)} failed: the reasons follow)" * bool(result.failed)
    kept = f"left {left} as their last run wrote them (nothing changed since)"
    if result.dry_run:
        would = f", {kept.replace('left', 'leave', 1)}" * bool(left)
        print(
            f"Dry run, nothing written to {result.db_path}: a run would impute {tables} on "
            f"{result.runner} (the quality checks passed){would}{failed}:"
        )
        for table in result.tables.values():
            print(f"  {describe_dry_run(table)}")
        return
    print(
        f"Imputed {tables} in {result.db_path} on {result.runner}"
        f"{f', {kept}' * bool(left)}{failed}:"
    )
    for name, table in result.tables.items():
        if table.model_version is not None:
            print(f"  {describe_increment(table)}")
            continue
        if table.unchanged_since is not None:
            print(
                f"  {name} -> {table.target_table}: left as run {table.unchanged_since} wrote it "
                "(the same source contents and settings), nothing fitted"
            )
            continue
        cells = sum(table.cells_imputed.values())
        per_column = cells_per_column(table.cells_imputed)
        what = f"{cells} cells imputed ({per_column})" if cells else _NOTHING_MISSING
        replaced = " (replacing the existing table)" if table.replaced_existing else ""
        print(f"  {name} -> {table.target_table}{replaced}: {table.rows} rows, {what}")
    if result.tables:
        run_id = next(iter(result.tables.values())).run_id
        elsewhere = "; a table left as it was has its cells under the run that wrote it"
        print(
            f"Lineage: run {run_id} in tdm_lineage, one row per table; the imputed cells are "
            f"listed in tdm_imputed_cells (by run_id and target_table){elsewhere * bool(left)}."
        )


_NOTHING_MISSING = "no missing value in the columns to impute, copied unchanged"


def _print_result(result: Any) -> None:
    from flows.steps import DRY_RUN, describe_result

    print(describe_result(result))
    if result.status != DRY_RUN:
        writer = result.unchanged_since or result.run_id
        print(
            f"Lineage: run {result.run_id} in tdm_lineage; the imputed cells are listed in "
            f"tdm_imputed_cells{f' under run {writer}' * (writer != result.run_id)}."
        )


def _print_where_to_look(db_path: str, target: str, run_id: str, cells_run: str) -> None:
    from tasks.warehouse.names import quote_identifier

    print(
        f"\nWhere to look: open {db_path} with the duckdb CLI, or in Python with "
        f"duckdb.connect({db_path!r}, read_only=True).sql(...), and run:\n"
        f"  SELECT * FROM {quote_identifier(target)} LIMIT 5;\n"
        f"  SELECT * FROM tdm_lineage WHERE run_id = '{run_id}';\n"
        "  SELECT column_name, count(*) AS cells FROM tdm_imputed_cells "
        f"WHERE run_id = '{cells_run}' GROUP BY ALL;\n"
        f"Prefect UI: {_where_the_ui_is()} (flow impute-table)."
    )


def _where_the_ui_is() -> str:
    """Where the run just made can be seen in Prefect's UI: its server's, when PREFECT_API_URL
    names one; else a server started on the Prefect home that recorded it."""
    api = os.environ.get("PREFECT_API_URL")
    if api:
        return f"open {api.rstrip('/').removesuffix('/api')}"
    port = os.environ.get("PREFECT_SERVER_API_PORT", "4200")
    return f"run `prefect server start` and open http://127.0.0.1:{port}"


if __name__ == "__main__":
    sys.exit(main())
