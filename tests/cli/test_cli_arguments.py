"""Argument types and flags shared by the `tdm` sub-commands."""

from __future__ import annotations

import argparse

import pytest

from cli.arguments import (
    add_column_flags,
    add_key_flag,
    parse_port,
    parse_positive,
    parse_share,
    split_names,
    split_required_names,
)


def test_names_are_split_on_commas_and_stripped_and_blanks_dropped() -> None:
    """`" a, b ,,c, "` names a, b and c; an empty text names nothing."""
    assert split_names(" a, b ,,c, ") == ["a", "b", "c"]
    assert split_names(" , ") == []


def test_required_names_refuse_a_text_that_names_nothing() -> None:
    """`split_required_names` keeps names as `split_names` does, and refuses `,` with its text."""
    assert split_required_names("x,y") == ["x", "y"]
    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated names; got ' , '"):
        split_required_names(" , ")


@pytest.mark.parametrize("text", ["0", "-3", "2.5", "many"])
def test_positive_refuses_what_is_not_a_positive_whole_number(text: str) -> None:
    """Zero, negatives, fractions and words are refused, naming what was given."""
    with pytest.raises(argparse.ArgumentTypeError, match=f"got '{text}'"):
        parse_positive(text)
    assert parse_positive("7") == 7


@pytest.mark.parametrize("text", ["0", "1", "2", "-0.1", "nan", "a quarter"])
def test_a_share_lies_strictly_between_0_and_1(text: str) -> None:
    """`tdm demo --missing-rate 2` is a usage error naming the value (bug: "a bug in tdm")."""
    with pytest.raises(argparse.ArgumentTypeError, match=f"between 0 and 1; got '{text}'"):
        parse_share(text)
    assert parse_share("0.25") == 0.25


@pytest.mark.parametrize("text", ["0", "65536", "99999", "-1", "http"])
def test_a_port_lies_from_1_to_65535(text: str) -> None:
    """`tdm serve --port 99999` is a usage error naming the value (bug: "unexpected error:
    OverflowError ... This is a bug", after saying it started a server on that port)."""
    with pytest.raises(argparse.ArgumentTypeError, match=f"from 1 to 65535; got '{text}'"):
        parse_port(text)
    assert parse_port("4200") == 4200


def test_columns_flags_add_up_and_the_key_is_one_name() -> None:
    """`--columns a,b --columns c` gives [a, b, c]; no flag gives None, so every column."""
    parser = argparse.ArgumentParser()
    add_column_flags(parser)
    add_key_flag(parser)
    given = parser.parse_args(["--columns", "a, b", "--columns", "c", "--key", "id"])
    assert (given.columns, given.key) == (["a", "b", "c"], "id")
    assert parser.parse_args([]).columns is None
