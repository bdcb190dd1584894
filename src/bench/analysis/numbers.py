"""Numbers and values as bench shows them, in every output (the report, compare, claims and their documents):
four significant digits, changes in percent read apart from their bounds, host times, values of a cell."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal

import numpy as np
import pandas as pd


def number(value: float) -> str:
    """Four significant digits; whole numbers and numbers from 10 000 up without a fraction."""
    if value is None or not math.isfinite(value):
        return ""
    if value == int(value) or abs(value) >= 1e4:
        return f"{value:.0f}"
    return f"{value:.4g}"


def cell(value) -> str:
    """A value as a person reads it: whole numbers without a fraction, four significant digits otherwise, yes/no,
    lists joined, nothing for missing values."""
    if type(value) is str:  # most are: as they are
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return ", ".join(cell(item) for item in value)
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return number(float(value))
    return str(value)


SCIENTIFIC = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)e([+-]?\d+)\b")


def plain_numbers(words: str) -> str:
    """'resident 1.15e+03' as 'resident 1150': numbers in text as the command line prints them, without exponents
    (for the views' sentences and headline cells)."""
    return SCIENTIFIC.sub(lambda match: format(Decimal(f"{match[1]}e{match[2]}"), "f"), words)


def decimals(change: float, bounds=()) -> int:
    """The fewest decimals, one or more, at which ``change`` in percent reads apart from each of ``bounds`` (the
    ones it differs from)."""
    for digits in range(1, 7):
        if all(f"{change:+.{digits}%}" != f"{bound:+.{digits}%}" for bound in bounds if bound != change):
            return digits
    return 7


def change_percent(line: Mapping) -> str:
    """A timed line's change as stated, its ratio less 1 ('+20.0%', '' without one), read apart from the spread's
    bounds in its note (:func:`decimals`)."""
    if not math.isfinite(line["ratio"]):
        return ""
    bounds = [line[column] for column in ("machine_spread_low", "machine_spread_high")
              if line.get(column) is not None and math.isfinite(line[column])]
    return f"{line['ratio'] - 1:+.{decimals(line['ratio'] - 1, bounds)}%}"


def short_ms(value: float) -> str:
    """A cell's host time: whole ms from 10 ms, hundredths from 10 µs, whole µs from 1 µs, else tenths of a µs."""
    if value >= 10:
        return f"{value:.0f}"
    if value >= 0.01:
        return f"{value:.2f}"
    return f"{value * 1e3:.0f}µs" if value >= 1e-3 else f"{value * 1e3:.1f}µs"


def ms_range(values: pd.Series) -> str:
    """A range of host times: '0.012 ms', or '0.012–0.150 ms'."""
    low, high = float(values.min()), float(values.max())
    return f"{low:.3f} ms" if abs(high - low) < 5e-4 else f"{low:.3f}–{high:.3f} ms"
