"""Where a run computed: the machine, the CPU kernels torch picked there and the versions of
the libraries, as a run's tags (``TrainingRun`` sets them on a new run, notes a resume elsewhere).

A run's floats depend on more than its commit, config and seed: on one machine a rerun is bit
for bit (the study's rechecks, ``docs/results_study_notes.md``), on another processor it
rounds differently from its first iteration (measured: the Figure 3 study's reruns on an AMD
EPYC against its runs on an Intel Xeon). The kernels torch and MKL pick follow the processor:
on the project's AMD EPYC, forcing ATen's scalar kernels (``ATEN_CPU_CAPABILITY=default``) or
MKL's compatible path (``MKL_CBWR=COMPATIBLE``) changes the bits of one ``nn.Linear`` forward
and backward (``recipes/benchmarks/kernel_rounding.py``). So a run carries what it ran on, and
two runs are compared bit for bit only where these tags agree.

Examples:
    >>> tags = environment_tags()
    >>> tags["software.torch"] == torch.__version__
    True
    >>> tags["machine.cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    True
    >>> changed({"machine": "a (2 cores, X)", "software.torch": "2.13.0"},
    ...         {"machine": "b (2 cores, Y)", "software.torch": "2.13.0"})
    'machine=b (2 cores, Y)'
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
from collections.abc import Mapping
from pathlib import Path

import torch

__all__ = ["ENVIRONMENT_TAGS", "RESUMED_ELSEWHERE", "changed", "cpu_model", "environment_tags",
           "machine", "recorded_environment"]

#: the packages whose code computes a run's numbers (the envs' physics included)
PACKAGES = ("torch", "torchrl", "tensordict", "numpy", "numba", "gymnasium", "mujoco")

#: the names of the tags ``environment_tags`` sets
ENVIRONMENT_TAGS = ("machine", "machine.cpu_capability", "software.python",
                    *(f"software.{name}" for name in PACKAGES))

#: the tag that lists what differed each time a run was continued on another machine or software
RESUMED_ELSEWHERE = "resumed_elsewhere"


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``'s model name, else ``platform.processor()``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown processor"


def machine() -> str:
    """This machine as a run's tag and a study's ``runs.csv`` note name it:
    ``"vm (2 cores, AMD EPYC)"``."""
    return f"{platform.node()} ({os.cpu_count()} cores, {cpu_model()})"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment_tags() -> dict[str, str]:
    """This process's machine (``machine``), the CPU instruction set torch's kernels use here
    (``machine.cpu_capability``: ``AVX512``, ``AVX2`` or ``DEFAULT``; ``ATEN_CPU_CAPABILITY``
    lowers it) and the versions of Python and of ``PACKAGES`` (``software.<name>``)."""
    values = (machine(), torch.backends.cpu.get_cpu_capability(), platform.python_version(),
              *(_version(name) for name in PACKAGES))
    return dict(zip(ENVIRONMENT_TAGS, values, strict=True))


def recorded_environment(tags: Mapping[str, str]) -> dict[str, str]:
    """Where a run computed, as it recorded it: its tags among ``ENVIRONMENT_TAGS`` (none for a
    run from before 2026-12-06, when runs began to set them).

        >>> recorded_environment({"seed": "0", "machine": "vm (2 cores, X)"})
        {'machine': 'vm (2 cores, X)'}
    """
    return {name: tags[name] for name in ENVIRONMENT_TAGS if name in tags}


def changed(recorded: Mapping[str, str], now: Mapping[str, str]) -> str:
    """The entries of ``now`` that ``recorded`` (a run's tags) holds otherwise, as
    ``"key=value, …"``; ``""`` when none differ. A key the run never recorded (a run created
    before these tags existed) counts as differing: nothing says it started here."""
    return ", ".join(f"{key}={value}" for key, value in now.items()
                     if recorded.get(key) != value)
