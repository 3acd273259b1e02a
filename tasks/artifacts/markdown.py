"""Markdown pieces shared by the artifacts of a run: code spans, table cells, numbers, images."""

from __future__ import annotations

import base64
import math
import re

__all__ = ["code_span", "format_number", "format_value", "png_image", "table_cell"]


def code_span(text: str) -> str:
    """`text` as a markdown code span, whatever backticks or line breaks it holds."""
    flat = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    if not longest:
        return f"`{flat}`"
    fence = "`" * (longest + 1)
    return f"{fence} {flat} {fence}"  # the spaces let the text start or end with a backtick


def table_cell(text: str) -> str:
    """`text` safe in a markdown table cell (pipes escaped, one line)."""
    return " ".join(str(text).splitlines()).replace("|", "\\|")


def format_number(value: float | None, digits: int = 4) -> str:
    """`value` to `digits` significant digits, in fixed notation with thousands separated
    (1,065; 12,350; 13.00; 0.005300), in scientific notation below 0.001 or from 10^9
    (1.234e-05); an empty string for None or NaN."""
    if value is None or math.isnan(value):
        return ""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    number = float(f"{value:.{digits}g}")  # rounded first: 9.99996 -> 10.00, not 10.000
    if number == 0:
        return f"{0:.{digits - 1}f}"
    if 1e-3 <= abs(number) < 1e9:
        decimals = max(0, digits - 1 - math.floor(math.log10(abs(number))))
        return f"{number:,.{decimals}f}"
    return f"{number:.{digits - 1}e}"


def format_value(value: float) -> str:
    """A data value (a bound, a minimum) as a reader would write it: whole numbers without
    decimals (0; 1,200), short decimals as they are (0.01), others as `format_number` gives
    them, infinite ones as ∞ and -∞."""
    if math.isinf(value):
        return "-∞" if value < 0 else "∞"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return text if len(text := repr(value)) <= 8 else format_number(value)


def png_image(png: bytes, alt: str) -> str:
    """A markdown image of `png` inlined as a data address (the Prefect UIs render it)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
