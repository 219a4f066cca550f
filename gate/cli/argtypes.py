"""The argparse types the `gate` command's flags share: each refuses what a flag cannot mean (NaN, a
negative wait, a share above 1) before anything runs."""

from __future__ import annotations

import argparse
import math
import re


def finite(text: str) -> float:
    """argparse type: a finite float (float() alone takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def share(text: str) -> float:
    """argparse type: a share from 0 to 1."""
    value = finite(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, not {text!r}")
    return value


def _whole(text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be from {low} to {high}, not {text!r}")
    return value


def room(text: str) -> int:
    """argparse type: a whole number of batches from 0 to 64."""
    return _whole(text, 0, 64)


def port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    return _whole(text, 0, 65535)


def run_id(text: str) -> str:
    """argparse type: a run id as a card may name it (`gate.core.card.card.RUN_ID`)."""
    from gate.core.card.card import RUN_ID  # late: the card models load only when the flag is given

    if not re.fullmatch(RUN_ID, text):
        raise argparse.ArgumentTypeError("a run id is 1 to 128 letters, digits, '.', '_' or '-'")
    return text


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds above 0."""
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return value
