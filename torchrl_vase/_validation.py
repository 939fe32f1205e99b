"""Argument checks shared by the library (clear errors that name the argument), and where a
module's tensors live (``module_device``)."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn


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


def check_positive_int(name: str, value: int, minimum: int = 1) -> int:
    """Validate a count (an ``int`` ≥ ``minimum``, not a bool) and return it: the library's one
    check of counts (sizes, steps, iterations, cadences).

    Examples:
        >>> check_positive_int("epochs", 3), check_positive_int("eval_every", 0, minimum=0)
        (3, 0)
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return value


def check_num_samples(num_samples: int) -> int:
    """Validate a number of weight samples (a positive ``int``) and return it."""
    return check_positive_int("num_samples", num_samples)


#: σ_c's range: the surprise ‖s' − f(s, a)‖² / (2σ_c²) of standardised predictions overflows
#: float32 below it, and 1/σ_c² vanishes against the KL above it.
SIGMA_C_RANGE = (1e-6, 1e6)


def check_sigma_c(value: float) -> float:
    """σ_c, the likelihood's std, as a float in ``SIGMA_C_RANGE``; else a ``ValueError``."""
    value = check_positive("sigma_c", value)
    low, high = SIGMA_C_RANGE
    if not low <= value <= high:
        raise ValueError(
            f"sigma_c must be in [{low:g}, {high:g}], got {value:g}: below, the surprise "
            "||s' - f(s, a)||^2 / (2 sigma_c^2) overflows float32; above, the likelihood no "
            "longer trains the model. The paper uses 5, the authors' script 0.5.")
    return value


def check_layer_widths(name: str, cells) -> list[int]:
    """Hidden-layer widths as a list of positive ints (``[]``: no hidden layer)."""
    widths = list(cells)
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths):
        raise ValueError(f"{name} must be a list of positive layer widths, got {widths}.")
    return widths


def module_device(module: nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (the CPU for a module with neither):
    where its inputs must be moved before a call."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        return tensor.device
    return torch.device("cpu")
