"""What the `tdm` sub-commands share: the usage-error exit status, argument types, table flags,
and the one torch thread setting every command honours."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "EXIT_USAGE",
    "add_column_flags",
    "add_draw_flags",
    "add_key_flag",
    "add_replace_target_flag",
    "add_torch_threads_flag",
    "limit_torch_threads",
    "parse_count",
    "parse_draws",
    "parse_port",
    "parse_positive",
    "parse_seconds",
    "parse_share",
    "split_names",
    "split_required_names",
    "torch_threads_setting",
]

_N = TypeVar("_N", int, float)

EXIT_USAGE = 2
"""Exit status of bad input: argparse's own code for usage errors."""


def split_names(text: str) -> list[str]:
    """`a, b,,c` → `["a", "b", "c"]`: comma-separated names, blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


def split_required_names(text: str) -> list[str]:
    """As `split_names`, refusing text that names nothing."""
    names = split_names(text)
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names; got {text!r}")
    return names


def parse_positive(text: str) -> int:
    """A positive whole number; anything else is a usage error."""
    return _positive(text, int, "whole number")


def parse_count(text: str) -> int:
    """A whole number, 0 or more; anything else is a usage error."""
    return _parsed(text, int, lambda n: n >= 0, "a whole number, 0 or more")


def parse_draws(text: str) -> int:
    """A number of draws: 0 (none) or at least 2; anything else is a usage error, so that no
    run is started for it."""
    expected = "0 (no draws) or at least 2 (one draw gives no interval)"
    return _parsed(text, int, lambda n: n == 0 or n >= 2, expected)


def parse_seconds(text: str) -> float:
    """A positive number of seconds; anything else is a usage error."""
    return _positive(text, float, "number of seconds")


def parse_port(text: str) -> int:
    """A TCP port, 1 to 65535; anything else is a usage error."""
    return _parsed(text, int, lambda n: 0 < n < 65536, "a port from 1 to 65535")


def parse_share(text: str) -> float:
    """A share strictly between 0 and 1 (0.25: a quarter); anything else is a usage error."""
    return _parsed(text, float, lambda x: 0 < x < 1, "a share between 0 and 1")


def _positive(text: str, kind: type[_N], what: str) -> _N:
    """`text` as a finite number of `kind` above 0, or a usage error expecting `what`."""
    return _parsed(text, kind, lambda x: 0 < x < float("inf"), f"a positive {what}")


def _parsed(text: str, kind: type[_N], accepted: Callable[[_N], bool], expected: str) -> _N:
    """`text` as a `kind` that `accepted` takes, or a usage error saying what was `expected`."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not accepted(value):
        raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}")
    return value


def add_torch_threads_flag(parser: argparse.ArgumentParser) -> None:
    """`--torch-threads N`: the CPU threads torch may use (`TDM_TORCH_THREADS`)."""
    from flows.settings import PipelineSettings

    field = PipelineSettings.model_fields["torch_threads"]
    parser.add_argument(
        "--torch-threads",
        type=int,
        metavar="N",
        help=f"{field.description} [env TDM_TORCH_THREADS; {field.default}]".replace("%", "%%"),
    )


def torch_threads_setting(flag: int | None) -> int:
    """The torch thread count: the flag when given, else TDM_TORCH_THREADS, else the default.

    Raises pydantic's `ValidationError` for a negative count (or an invalid TDM_* variable).
    """
    from flows.settings import PipelineSettings

    if flag is not None:
        return PipelineSettings(torch_threads=flag).torch_threads
    return PipelineSettings.from_env().torch_threads


def limit_torch_threads(threads: int | None) -> None:
    """Cap torch's CPU threads for this process (the command owns it; the library never does);
    0 or None leaves torch's default (one thread per core)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def add_column_flags(parser: argparse.ArgumentParser) -> None:
    """`--columns a,b`, the columns to impute, and `--pass-through a,b`, columns left as they
    are, NULLs included; both repeatable (they add up)."""
    parser.add_argument(
        "--columns",
        type=split_names,
        action="extend",
        help="comma-separated columns to impute [every numeric column, and every text, enum or "
        "boolean column with a NULL, but the key, identifiers, all-NULL and free-text columns "
        "and the --pass-through columns: docs/operator.md, 'What is imputed']",
    )
    parser.add_argument(
        "--pass-through",
        dest="pass_through",
        type=split_names,
        action="extend",
        metavar="COLS",
        help="comma-separated columns to leave as they are, NULLs included, when the columns "
        "are chosen by default (e.g. a free-text column) [none]",
    )


def add_replace_target_flag(parser: argparse.ArgumentParser) -> None:
    """`--replace-target`: replace an existing target table the pipeline did not write."""
    parser.add_argument(
        "--replace-target",
        dest="replace_target",
        action=argparse.BooleanOptionalAction,
        help="replace an existing target table that this pipeline did not write (no tdm_lineage "
        "row names it); its own earlier targets are replaced without it "
        "[env TDM_REPLACE_TARGET; false]",
    )


def add_draw_flags(parser: argparse.ArgumentParser, *, whose: str = "") -> None:
    """`--fill {point,draw}`, what the target receives, and `--draws K`, the draws that
    measure each imputed cell's uncertainty (`TDM_FILL`, `TDM_DRAWS`; `whose`: whose variables
    they default to, e.g. "its " for a served run)."""
    from flows.settings import PipelineSettings
    from tasks.draws import FILLS

    fields = PipelineSettings.model_fields
    parser.add_argument(
        "--fill",
        choices=FILLS,
        help=f"{fields['fill'].description} [{whose}env TDM_FILL; point]".replace("%", "%%"),
    )
    parser.add_argument(
        "--draws",
        type=parse_draws,
        metavar="K",
        help=f"{fields['draws'].description} [{whose}env TDM_DRAWS; 0]".replace("%", "%%"),
    )


def add_key_flag(parser: argparse.ArgumentParser) -> None:
    """`--key NAME`: the key column of the table."""
    parser.add_argument("--key", help="key column: must be unique and not null; never imputed")


def add_incremental_flags(parser: argparse.ArgumentParser) -> None:
    """`--incremental`, `--watermark` and `--refit`: runs that keep a model per target."""
    parser.add_argument(
        "--incremental",
        action="store_true",
        help="keep the fitted model in tdm_models and, on later runs, impute only the rows the "
        "target does not hold yet with it (needs --key or --watermark); a refit happens on "
        "--refit, on drift (TDM_DRIFT_THRESHOLD, TDM_ON_DRIFT), by age (TDM_REFIT_EVERY_DAYS) "
        "or when the stored model is unusable",
    )
    parser.add_argument(
        "--watermark",
        metavar="COLUMN",
        help="incremental runs without a key: rows whose COLUMN is above the target's highest "
        "value are new (COLUMN is never imputed, like a key)",
    )
    parser.add_argument(
        "--refit",
        action="store_true",
        help="fit now: an incremental run fits a new model version, a whole-table run fits "
        "and writes even when its table is unchanged since the last run",
    )
