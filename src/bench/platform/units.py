"""Byte sizes as people write them: '4K', '16MiB', '1G' (binary units) and back."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
LARGEST = 1 << 40  # a transfer size above this (1 TiB) is a typo
_SIZE = re.compile(r"^\s*([-+]?\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'4K' → 4096. Units are binary (K = KiB). Raises ValueError with a message for the user."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 4096, 64K, 16MiB, 1G)")
    value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    if value > LARGEST:
        raise ValueError(f"{text!r} is over {format_size(LARGEST)}, more than any GPU's memory")
    return value


def parse_sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list; 'A:B' is every power of two from A to B. Sorted, without duplicates."""
    sizes: set[int] = set()
    for item in text.split(","):
        if ":" in item:
            low, high = (parse_size(part) for part in item.split(":", 1))
            if low > high:
                raise ValueError(f"{item!r}: the range's start is above its end")
            power = 1 << (low - 1).bit_length()
            while power <= high:
                sizes.add(power)
                power <<= 1
        else:
            sizes.add(parse_size(item))
    if not sizes:
        raise ValueError(f"{text!r} names no sizes")
    return tuple(sorted(sizes))


def format_size(nbytes: int) -> str:
    """4096 → '4 KiB'; sizes that are not a whole number of the unit keep one decimal."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"
