"""The rules for fixed-shape step sizes (`--fixed-rows`) in one place: every command's option parses
with them and the lean runner checks with them."""

from __future__ import annotations

import argparse

from draftsmith.errors import DraftsmithError

PAD_SLACK = 16
"""Extra cache rows so a step may be padded up to a faster matmul shape."""

MIXED_ROWS = "mixed"
"""`fixed_rows` value asking for mixed exact step shapes (`LeanLlamaRunner.set_mixed_rows`)."""


def check_fixed_rows(rows: object) -> int:
    """The one rule for fixed-shape step sizes: 0 (off) or 2..PAD_SLACK rows (the padded rows must
    fit the cache slack)."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0 or rows == 1 or rows > PAD_SLACK:
        raise DraftsmithError(f"fixed rows must be 0 (off) or an integer 2..{PAD_SLACK}, got {rows!r}")
    return rows


def parse_fixed_rows(value: str) -> int | str | None:
    """A `--fixed-rows` value: "auto" (None), "mixed", or 0 / 2..PAD_SLACK rows."""
    if value in ("auto", MIXED_ROWS):
        return None if value == "auto" else MIXED_ROWS
    try:
        return check_fixed_rows(int(value))
    except (ValueError, DraftsmithError) as e:
        raise ValueError(f"expected auto, mixed, 0 (off) or 2..{PAD_SLACK}, got {value!r}") from e


def fixed_rows_arg(value: str) -> int | str | None:
    """`parse_fixed_rows` as an argparse type (its message, not argparse's generic one)."""
    try:
        return parse_fixed_rows(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
