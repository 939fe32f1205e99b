"""Argument checks shared by the library: clear errors that name the argument."""

from __future__ import annotations

import math


def _real(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    return float(value)


def check_positive(name: str, value: float) -> float:
    """``value`` as a float if it is finite and > 0; else a ``TypeError``/``ValueError``."""
    value = _real(name, value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}.")
    return value


def check_non_negative(name: str, value: float) -> float:
    """``value`` as a float if it is finite and ≥ 0; else a ``TypeError``/``ValueError``."""
    value = _real(name, value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}.")
    return value


def check_num_samples(num_samples: int) -> int:
    """Validate a number of weight samples (a positive ``int``) and return it."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int):
        raise TypeError(f"num_samples must be an int, got {type(num_samples).__name__}.")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}.")
    return num_samples
