"""What the `tdm` sub-commands share: the usage-error exit status, argument types, table flags."""

from __future__ import annotations

import argparse

__all__ = [
    "EXIT_USAGE",
    "add_columns_flag",
    "add_key_flag",
    "add_replace_target_flag",
    "parse_positive",
    "split_names",
    "split_required_names",
]

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
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number; got {text!r}")
    return value


def add_columns_flag(parser: argparse.ArgumentParser) -> None:
    """`--columns a,b`: the columns to impute, repeatable (they add up)."""
    parser.add_argument(
        "--columns",
        type=split_names,
        action="extend",
        help="comma-separated columns to impute [every numeric column but the key]",
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


def add_key_flag(parser: argparse.ArgumentParser) -> None:
    """`--key NAME`: the key column of the table."""
    parser.add_argument("--key", help="key column: must be unique and not null; never imputed")
