"""Where a module's tensors live."""

from __future__ import annotations

import itertools

import torch
from torch import nn


def module_device(module: nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (the CPU for a module with neither):
    where its inputs must be moved before a call."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        return tensor.device
    return torch.device("cpu")
