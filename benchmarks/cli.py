"""`tdm bench`: run (or resume) the benchmark grid and write the report.

`add_bench_command(subparsers)` registers the sub-command on the `tdm` parser (`cli.main`).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Sequence

from cli.arguments import (
    EXIT_USAGE,
    add_torch_threads_flag,
    limit_torch_threads,
    split_required_names,
    torch_threads_setting,
)

__all__ = ["add_bench_command", "grid_settings", "parse_seeds", "run_bench"]


def parse_seeds(text: str) -> list[int]:
    """`0,1,2` → those seeds; a single number `N` → seeds 0..N-1; `5,` → seed 5 alone."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds takes a count (3) or comma-separated seeds (0,1,2); got {text!r}"
        ) from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"--seeds must be non-negative; got {text!r}")
    if "," in text:
        return values
    if values[0] == 0:
        raise argparse.ArgumentTypeError(
            "--seeds 0 would be no seed at all (a single number is a count); for seed 0 alone "
            "write '0,'"
        )
    return list(range(values[0]))


def _seed_list(text: str) -> list[int]:
    """Comma-separated seeds, a single number being one seed (for --trace-seeds)."""
    return parse_seeds(text if "," in text else text + ",")


def add_bench_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `bench` on the `tdm` parser's sub-commands, with its flags and handler."""
    from benchmarks.flow import (
        DEFAULT_DATASETS,
        DEFAULT_DB_PATH,
        DEFAULT_MECHANISMS,
        DEFAULT_METHODS,
        MIXED_DB_PATH,
        MIXED_METHODS,
    )

    bench = subparsers.add_parser(
        "bench",
        help="run the paper's benchmark grid (resumable) and write the report",
        description="Run datasets x mechanisms x seeds x methods as Prefect tasks, recording each "
        "trial in a DuckDB results table as it finishes; trials already recorded are skipped, so "
        "an interrupted run resumes. Then write tables.md and figures/ next to the database.",
    )
    bench.add_argument(
        "--mixed",
        action="store_true",
        help="the mixed-type grid: the six tables of <data-dir>/mixed/, methods "
        f"{','.join(MIXED_METHODS)}, seeds 0-4, --db {MIXED_DB_PATH} (each unless given); "
        "numeric MAE in column SDs and categorical error rate",
    )
    bench.add_argument(
        "--datasets",
        type=split_required_names,
        default=None,
        help=f"comma-separated [{','.join(DEFAULT_DATASETS)}; --mixed: the six mixed tables]",
    )
    bench.add_argument(
        "--mechanisms",
        type=split_required_names,
        default=list(DEFAULT_MECHANISMS),
        help=f"mcar,mar,mnarl,mnarq [{','.join(DEFAULT_MECHANISMS)}]",
    )
    bench.add_argument(
        "--seeds",
        type=parse_seeds,
        default=None,
        help="a count N (seeds 0..N-1) or comma-separated seeds [3; --mixed: 5]",
    )
    bench.add_argument(
        "--methods",
        type=split_required_names,
        default=None,
        help=f"comma-separated [{','.join(DEFAULT_METHODS)}; --mixed: {','.join(MIXED_METHODS)}]",
    )
    bench.add_argument("--p", type=float, default=0.3, help="missing rate [0.3]")
    bench.add_argument(
        "--max-iter",
        type=int,
        default=None,
        help="override max_iter of the iterative methods (small CI grids) "
        "[each method's own; tdm_paper: 10000]",
    )
    bench.add_argument(
        "--db", default=None, help=f"results file [{DEFAULT_DB_PATH}; --mixed: {MIXED_DB_PATH}]"
    )
    bench.add_argument("--report-dir", default=None, help="report folder [the --db folder]")
    bench.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing; rewrite the report from the results table",
    )
    bench.add_argument(
        "--merge",
        type=split_required_names,
        default=None,
        metavar="FILES",
        help="run nothing; add the trials of these results files (comma-separated DuckDB "
        "files, e.g. runs from other machines, or a report's benchmark.csv) to --db, keeping "
        "trials already there, then rewrite the report",
    )
    bench.add_argument(
        "--svm-repeats",
        type=int,
        default=3,
        help="repeats of the 5-fold SVM CV (paper: 10; 0 skips it) [3]",
    )
    bench.add_argument("--workers", type=int, default=1, help="trials at once [1]")
    bench.add_argument(
        "--data-dir",
        default=None,
        help="folder of the dataset CSVs [env TDM_DATASETS_DIR; ../shared/datasets]",
    )
    bench.add_argument(
        "--trace-dataset",
        default=None,
        help="also record MAE over iterations of TDM/OT on this dataset (refits)",
    )
    bench.add_argument(
        "--trace-seeds", type=_seed_list, default=[0], help="seeds of the MAE traces, e.g. 0,1 [0]"
    )
    add_torch_threads_flag(bench)
    bench.set_defaults(handler=run_bench)


def grid_settings(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with the grid's unset flags filled: the paper grid's defaults, or with `--mixed`
    the mixed-type grid's (its tables, methods, seeds 0-4 and results file)."""
    from benchmarks import flow as defaults

    filled = argparse.Namespace(**vars(args))
    if getattr(args, "mixed", False):
        from benchmarks.datasets import MIXED_DATASETS

        grid = (MIXED_DATASETS, defaults.MIXED_METHODS, defaults.MIXED_SEEDS)
        db = defaults.MIXED_DB_PATH
    else:
        grid = (defaults.DEFAULT_DATASETS, defaults.DEFAULT_METHODS, (0, 1, 2))
        db = defaults.DEFAULT_DB_PATH
    for name, value in zip(("datasets", "methods", "seeds"), grid, strict=True):
        if getattr(args, name, None) is None:
            setattr(filled, name, list(value))
    if getattr(args, "db", None) is None:
        filled.db = db
    return filled


def grid_problem(args: argparse.Namespace, report_dir: str) -> str | None:
    """What is wrong with the grid `args` asks for (`grid_settings` applied), before any trial
    runs: unknown datasets, methods or mechanisms, a table of the other grid, a dataset file
    that does not exist, settings out of range, a seed given twice, a results file that is a
    folder or, with `--report-only`, missing; a missing rate a mechanism cannot reach; trials
    recorded with another `--svm-repeats` or at another missing rate; or a report folder whose
    `benchmark.csv` holds trials the results file lacks (writing the report would replace it).
    None: nothing."""
    from benchmarks.datasets import DATASETS, MIXED_DATASETS, MIXED_MECHANISMS, dataset_path
    from benchmarks.registry import REGISTRY
    from tdm.simulate import MECHANISMS

    mixed = bool(getattr(args, "mixed", False))
    grid, other = (MIXED_DATASETS, DATASETS) if mixed else (DATASETS, MIXED_DATASETS)
    names = [*args.datasets, *([args.trace_dataset] if args.trace_dataset else [])]
    for name in names:
        if name in other:
            flag = "without --mixed" if mixed else "with --mixed"
            return f"dataset {name!r} belongs to the other grid: run it {flag}"
        if name not in grid:
            return f"unknown dataset {name!r}; known: {', '.join(grid)}"
        path = dataset_path(name, args.data_dir, mixed=mixed)
        if path is None or not path.is_file():
            return (
                f"dataset file {path or name + '.csv'} does not exist: give the datasets' folder "
                "with --data-dir or TDM_DATASETS_DIR"
            )
    unknown = [m for m in args.methods if m not in REGISTRY]
    if unknown:
        return f"unknown method {unknown[0]!r}; known: {', '.join(REGISTRY)}"
    mechanisms = MIXED_MECHANISMS if mixed else MECHANISMS
    unknown = [m for m in args.mechanisms if m not in mechanisms]
    if unknown:
        return f"unknown mechanism {unknown[0]!r}; this grid's: {', '.join(mechanisms)}"
    twice = sorted({seed for seed in args.seeds if args.seeds.count(seed) > 1})
    if twice:
        return f"--seeds lists seed {twice[0]} more than once"
    ranges = [
        (not 0 < args.p < 1, f"--p must be a missing rate in (0, 1); got {args.p}"),
        (args.max_iter is not None and args.max_iter < 0, "--max-iter must be at least 0"),
        (args.svm_repeats < 0, "--svm-repeats must be at least 0"),
        (args.workers < 1, "--workers must be at least 1"),
        (os.path.isdir(args.db), f"--db {args.db} is a folder; give a DuckDB file"),
        (
            args.report_only and not os.path.isfile(args.db),
            f"--report-only: results file {args.db} does not exist",
        ),
    ]
    for wrong, message in ranges:
        if wrong:
            return message
    if not args.report_only and (
        problem := _unreachable_rate(args, mixed) or _svm_repeats_problem(args, mixed)
    ):
        return problem
    asked = () if args.report_only else (args.p,)
    return _rates_problem(args.db, (), asked) or _report_would_lose_trials(args.db, report_dir)


def _unreachable_rate(args: argparse.Namespace, mixed: bool) -> str | None:
    """Which dataset and mechanism of the grid cannot mask `--p` of its cells (as MAR cannot
    past the share of its non-driver columns), found on the first seed's masks; None: none."""
    from benchmarks.datasets import load_dataset, load_mixed_dataset
    from benchmarks.trial import masked_input

    load = load_mixed_dataset if mixed else load_dataset
    for name in args.datasets:
        dataset = load(name, data_dir=args.data_dir)
        for mechanism in args.mechanisms:
            try:
                masked_input(dataset, mechanism, args.seeds[0], args.p)
            except ValueError as error:
                reason = str(error).split(";")[0]
                return f"--p {args.p:g} is out of reach of {mechanism} on {name}: {reason}"
    return None


def _svm_repeats_problem(args: argparse.Namespace, mixed: bool) -> str | None:
    """Why the grid's trials recorded in the results file with another `--svm-repeats` would
    keep their SVM accuracy (a recorded trial is not run again): None where none is."""
    from benchmarks.datasets import load_dataset
    from benchmarks.flow import plan_grid
    from benchmarks.schemas import TRIAL_KEY
    from benchmarks.tasks import read_results

    if mixed or not os.path.isfile(args.db):
        return None
    labelled = [n for n in args.datasets if load_dataset(n, data_dir=args.data_dir).svm_scored]
    planned = plan_grid(labelled, args.mechanisms, args.seeds, args.methods, args.p, args.max_iter)
    recorded = read_results(args.db)
    repeats = {
        tuple(row[:-1]): row[-1]
        for row in recorded[[*TRIAL_KEY, "svm_repeats"]].itertuples(index=False)
    }
    other = sorted(
        {int(repeats[key]) for spec in planned if (key := spec.key) in repeats} - {args.svm_repeats}
    )
    if not other:
        return None
    return (
        f"results file {args.db} holds trials of this grid measured with --svm-repeats "
        f"{', '.join(map(str, other))}, which are not run again: give that --svm-repeats, or a "
        "results file of its own (--db)"
    )


def _rates_problem(db_path: str, merged: Sequence[str], asked: Sequence[float]) -> str | None:
    """Why the results file `db_path`, with the files `merged` added and a grid at the missing
    rates `asked`, would hold several missing rates (one report covers one); None if not."""
    from benchmarks.tasks import trial_keys

    held = {key[4] for key in trial_keys(db_path)}
    rates = held.union(*({key[4] for key in trial_keys(path)} for path in merged), asked)
    if len(rates) < 2:
        return None
    if asked and asked[0] in held:  # a file of several rates, recorded before this rule
        return (
            f"results file {db_path} holds trials at --p "
            f"{', '.join(f'{p:g}' for p in sorted(held))}, recorded before a results file held "
            "one rate, and a report covers one: give each rate a results file of its own (--db)"
        )
    if asked and held:
        return (
            f"results file {db_path} holds trials at --p "
            f"{', '.join(f'{p:g}' for p in sorted(held))}; a grid at --p {asked[0]:g} needs a "
            "results file of its own (--db)"
        )
    return (
        f"the results would hold {len(rates)} missing rates "
        f"({', '.join(f'{p:g}' for p in sorted(rates))}), and a report covers one: keep each "
        "rate in a results file of its own"
    )


def _report_would_lose_trials(
    db_path: str, report_dir: str, merged: Sequence[str] = ()
) -> str | None:
    """Why writing the report of `db_path` (with the results files `merged` added) into
    `report_dir` would lose recorded trials: its `benchmark.csv` holds trials they lack, or is
    no report this release reads (None: neither)."""
    from pandera.errors import SchemaError, SchemaErrors

    from benchmarks.tasks import trial_keys

    csv = os.path.join(report_dir, "benchmark.csv")
    try:
        held = trial_keys(csv)
    except (ValueError, SchemaError, SchemaErrors) as error:
        reason = str(error).removeprefix("merge: ").splitlines()[0]
        return (
            f"the report folder's {reason}; writing the report would replace it: move it away, "
            "or give another --report-dir"
        )
    if not held:
        return None
    lost = held - set().union(trial_keys(db_path), *map(trial_keys, merged))
    if not lost:
        return None
    return (
        f"{csv} holds {len(lost)} of its {len(held)} trials that results file {db_path} lacks"
        f"{' (with what --merge adds)' if merged else ''}: writing the report would lose them. "
        f"Add them first (tdm bench --db {db_path} --merge {csv}), or give another --report-dir"
    )


def run_bench(args: argparse.Namespace) -> int:
    """Handler of `tdm bench`: run the flow (or only the report); returns the exit status."""
    limit_torch_threads(torch_threads_setting(args.torch_threads))
    from benchmarks.flow import TrialsFailedError, benchmark, benchmark_merge, benchmark_report

    args = grid_settings(args)
    report_dir = args.report_dir or os.path.dirname(args.db) or "."
    from pandera.errors import SchemaError, SchemaErrors

    if not args.merge:
        import duckdb

        try:
            problem = grid_problem(args, report_dir)
        except (ValueError, SchemaError, SchemaErrors) as error:  # a results file it cannot read
            problem = str(error).rstrip(".")
        except duckdb.Error as error:
            problem = f"results file {args.db} cannot be read: {str(error).rstrip('!.')}"
        if problem:
            print(f"tdm bench: error: {problem}.", file=sys.stderr)
            return EXIT_USAGE
    if args.merge:
        try:
            if problem := _rates_problem(args.db, args.merge, ()) or _report_would_lose_trials(
                args.db, report_dir, args.merge
            ):
                print(f"tdm bench: error: {problem}.", file=sys.stderr)
                return EXIT_USAGE
            counts, report = benchmark_merge(args.merge, args.db, report_dir)
        except (OSError, ValueError, SchemaError, SchemaErrors) as error:
            print(f"tdm bench: error: {error}", file=sys.stderr)
            return EXIT_USAGE
        for count in counts:
            print(
                f"{count.source}: {count.trials_added} trials added, "
                f"{count.trials_already_here} already in {args.db}"
            )
        print(f"Report: {report.tables_path}")
        return 0
    if args.report_only:
        try:
            report = benchmark_report(args.db, report_dir)
        except ValueError as error:  # several missing rates, recorded before they were refused
            print(f"tdm bench: error: {error}.", file=sys.stderr)
            return EXIT_USAGE
        print(f"Report: {report.tables_path}; figures: {', '.join(map(str, report.figure_paths))}")
        return 0
    # The flags named as the flow's parameters are its parameters.
    parameters = inspect.signature(benchmark.fn).parameters
    grid = {name: value for name, value in vars(args).items() if name in parameters}
    try:
        outcome = benchmark(**{**grid, "db_path": args.db, "report_dir": report_dir})
    except TrialsFailedError as error:
        print(f"tdm bench: error: {error}", file=sys.stderr)
        return 1
    print(
        f"{outcome.planned} trials planned: {outcome.skipped} already recorded, {outcome.ran} run."
        f"\nReport: {outcome.tables_path}; figures: {', '.join(outcome.figure_paths)}"
    )
    return 0
