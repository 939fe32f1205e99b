"""Which kernel choices change a run's bits: the same float32 computations on fixed inputs, in a
fresh process per setting, each setting forcing one library onto another code path of this
processor, their results' hashes against the unforced process's.

Why: the Figure 3 study's reruns are bit for bit on the machine a run ran on and differ from
their first iteration on another processor (``docs/results.md``, "How the study was run"). The
libraries pick their kernels from the processor: ATen its vectorised kernels
(``ATEN_CPU_CAPABILITY``: ``avx512``, ``avx2``, ``default``), MKL its matrix products
(``MKL_CBWR``: a fixed branch, ``COMPATIBLE`` the SSE2 one; ``MKL_VERBOSE`` names the path it
took), numba the instructions it compiles
the ELBO kernel for (``NUMBA_CPU_NAME=generic``: no host-specific instructions). A setting that
changes a hash here is a path by which another processor can round a run differently; one that
does not is not shown to be one (a branch equal to the default here may be the default's path
on this processor only).

The computations: a two-layer ``nn.Linear`` network's forward and backward on 5,000 rows (the
policy's and critic's arithmetic), and one iteration of the VASE model's training (``ModelTrainer``,
the numba kernel, 50 steps of 10 on fixed transitions of MountainCar's size).

    python recipes/benchmarks/kernel_rounding.py          # the table (about a minute: numba's
                                                          # generic build compiles its kernel)
    python recipes/benchmarks/kernel_rounding.py --child  # this process's hashes, one JSON line
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

#: (label, environment) in the order printed; the first is the reference
SETTINGS = (
    ("as installed", {}),
    ("ATEN_CPU_CAPABILITY=avx2", {"ATEN_CPU_CAPABILITY": "avx2"}),
    ("ATEN_CPU_CAPABILITY=default", {"ATEN_CPU_CAPABILITY": "default"}),
    ("MKL_CBWR=AVX512", {"MKL_CBWR": "AVX512"}),
    ("MKL_CBWR=SSE4_2", {"MKL_CBWR": "SSE4_2"}),
    ("MKL_CBWR=COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}),
    ("NUMBA_CPU_NAME=generic", {"NUMBA_CPU_NAME": "generic"}),
)


def _digest(*arrays) -> str:
    sha = hashlib.sha1()
    for array in arrays:
        sha.update(array.detach().contiguous().numpy().tobytes())
    return sha.hexdigest()[:12]


def hashes() -> dict[str, str]:
    """This process's results on the fixed inputs, hashed, and the kernels it ran."""
    import torch
    from tensordict import TensorDict
    from torch import nn

    from torchrl_vase import DynamicsModel, ModelTrainer, VariationalELBOLoss

    torch.set_num_threads(1)  # a thread count is a path too: one, as each study job runs
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(37, 64), nn.Tanh(), nn.Linear(64, 8))
    inputs = torch.randn(5_000, 37)
    output = network(inputs)
    output.pow(2).mean().backward()
    linear = _digest(output, *(p.grad for p in network.parameters()))

    torch.manual_seed(0)
    loss = VariationalELBOLoss(DynamicsModel.build(2, 1, standardize=False), kl_weight=0.1)
    trainer = ModelTrainer(loss, batch_size=10)
    sample = TensorDict({"observation": torch.randn(500, 2), "action": torch.randn(500, 1),
                         ("next", "observation"): torch.randn(500, 2)}, [500])
    trainer(sample)
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "linear": linear,
            "elbo": _digest(*loss.model.parameters()), "elbo_backend": trainer.backend}


def mkl_path(output: str) -> str:
    """The code path MKL says it dispatched to, from its ``MKL_VERBOSE`` header (``"… for Intel(R)
    64 architecture Intel(R) Architecture processors, …"`` on a processor it has no branch for).

        >>> mkl_path("MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 "
        ...          "architecture Intel(R) Architecture processors, Lnx 2.60GHz lp64 gnu_thread")
        'Intel(R) Architecture processors'
    """
    for line in output.splitlines():
        if line.startswith("MKL_VERBOSE oneMKL"):
            return line.split(" architecture ", 1)[-1].split(",")[0]
    return "MKL not called"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    if parser.parse_args().child:
        print(json.dumps(hashes()))
        return
    from torchrl_vase.runs import machine

    print(f"{machine()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| setting | ATen's kernels | MKL's path | nn.Linear forward and backward | the ELBO "
          "kernel's iteration |")
    print("|---|---|---|---|---|")
    reference = None
    for label, environment in SETTINGS:
        # MKL_VERBOSE only logs (which path each product took): it changes no bits
        child = subprocess.run([sys.executable, __file__, "--child"], check=True,
                               capture_output=True, text=True,
                               env={**os.environ, **environment, "MKL_VERBOSE": "1"})
        result = json.loads(child.stdout.strip().splitlines()[-1])
        reference = reference or result
        same = {key: "same bits" if result[key] == reference[key] else "**other bits**"
                for key in ("linear", "elbo")}
        print(f"| {label} | {result['cpu_capability']} | {mkl_path(child.stdout)} | "
              f"{same['linear']} | {same['elbo']} ({result['elbo_backend']}) |")


if __name__ == "__main__":
    main()
