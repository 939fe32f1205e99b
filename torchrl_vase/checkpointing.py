"""What a training loop needs to survive anything: a run's identity, atomic checkpoints that load
safely, the random state in a loadable form.

Examples:
    >>> import tempfile, torch
    >>> from torchrl_vase.checkpointing import Checkpointer, config_identity, rng_state
    >>> identity = config_identity({"seed": 0, "lr": 1e-3, "resume": True}, ignore=["resume"])
    >>> identity == config_identity({"lr": 1e-3, "seed": 0}, ignore=[])
    True
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     checkpointer = Checkpointer(tmp)
    ...     _ = checkpointer.save({"step": torch.tensor(3), "rng": rng_state()})
    ...     int(checkpointer.load()["step"])
    3
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import os
import pickle
import random
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["DIGEST_KEY", "Checkpointer", "check_writable", "config_identity", "content_digest",
           "load_checkpoint", "rng_state", "saveable_prefix", "set_rng_state", "trusting_unsigned"]


#: below this much free space, a torch writer's failure is taken for a full disk (its own
#: message, "unexpected pos …", hides the ENOSPC)
_NEARLY_FULL = 64 * 2**20


def _out_of_space(error: BaseException, directory: Path) -> bool:
    """Whether ``error``, raised while writing a file in ``directory``, is a full disk."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(error, RuntimeError) and ("unexpected pos" in str(error)
                                            or "failed writing" in str(error)):
        return shutil.disk_usage(directory).free < _NEARLY_FULL
    return False


def config_identity(config: Mapping, ignore: Iterable[str] = (), length: int = 12) -> str:
    """A short hash of a nested config without the dotted keys in ``ignore``: equal exactly when two
    configs agree on every other leaf, whatever their keys' order."""
    ignored = set(ignore)

    def strip(node, prefix: str):
        if isinstance(node, Mapping):
            return {
                str(key): strip(value, f"{prefix}{key}.")
                for key, value in node.items()
                if f"{prefix}{key}" not in ignored}
        if isinstance(node, (list, tuple)):
            return [strip(value, prefix) for value in node]
        return node

    text = json.dumps(strip(config, ""), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def check_writable(directory: str | os.PathLike, what: str) -> Path:
    """Create ``directory`` if needed and prove a file can be written there; else a clear
    ``PermissionError`` naming ``what`` (e.g. the config key), before any work is done."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        raise PermissionError(
            f"{what}: cannot write to {str(path)!r} ({error.strerror or error}). Choose a "
            "writable directory.") from None
    return path


def rng_state() -> dict:
    """torch's, numpy's global and Python's random state, in types ``torch.load(...,
    weights_only=True)`` accepts."""
    kind, keys, position, has_gauss, cached = np.random.get_state()  # noqa: NPY002
    return {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
                  "position": int(position), "has_gauss": int(has_gauss),
                  "cached_gaussian": float(cached)},
        "python": random.getstate(),
    }


def set_rng_state(state: dict) -> None:
    """Restore what ``rng_state`` returned."""
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((  # noqa: NPY002
        numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"],
        numpy["has_gauss"], numpy["cached_gaussian"],
    ))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


class Checkpointer:
    """One run's checkpoint file, written atomically and loaded with ``weights_only=True``.

    ``save`` writes a temporary file of its own, flushes it and renames it over the checkpoint, so a
    kill leaves the previous checkpoint or the new one, never a torn file; the file is private and
    carries the SHA-256 of its own content, which ``load_checkpoint`` checks.

    Args:
        directory: the run's own directory (created, and checked writable, at construction).
        filename: the checkpoint's name in it."""

    def __init__(self, directory: str | os.PathLike, filename: str = "last.pt") -> None:
        self.directory = check_writable(directory, "checkpoint directory")
        self.directory.chmod(0o700)  # the run's own directory: private, as its files are
        self.path = self.directory / filename

    def exists(self) -> bool:
        return self.path.exists()

    def save(self, state: dict) -> Path:
        descriptor, temporary = tempfile.mkstemp(
            dir=self.directory, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            # private whatever the umask (mkstemp's 0600): a run's checkpoint holds its policy
            # and config, which other users of the machine have no business reading
            with os.fdopen(descriptor, "wb") as file:
                torch.save({**state, DIGEST_KEY: content_digest(state)}, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
            # a digest file of the former format beside it would speak for older bytes
            with contextlib.suppress(FileNotFoundError):
                checksum_path(self.path).unlink()
        except BaseException as error:
            full = _out_of_space(error, self.directory)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            if full:
                free = shutil.disk_usage(self.directory).free
                raise OSError(errno.ENOSPC, (
                    f"no space left on the disk of {self.directory} to write the checkpoint "
                    f"{self.path.name} ({free / 2**20:.0f} MiB free once the partial file is "
                    "removed); the previous checkpoint is intact. Free space there (or move "
                    "checkpoint.dir), then continue with resume=true")) from None
            raise
        for stale in self.directory.glob(f".{self.path.name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        return self.path

    def load(self) -> dict:
        """The checkpoint's state; tensors, containers and plain values only (no code runs)."""
        if not self.path.exists():
            raise FileNotFoundError(f"no checkpoint at {self.path}.")
        return load_checkpoint(self.path)


def saveable_prefix(tensor: Tensor, rows: int) -> Tensor:
    """The first ``rows`` rows of ``tensor`` for ``torch.save``, sharing their memory where possible
    (a contiguous CPU tensor of a numpy dtype), so saving a pool of gigabytes does not first clone
    it; otherwise a clone. Save the result before the rows change.

    Examples:
        >>> import io, torch
        >>> pool = torch.zeros(1000, 8)
        >>> prefix = saveable_prefix(pool, 10)
        >>> prefix.shape, prefix.data_ptr() == pool.data_ptr()  # the same memory
        (torch.Size([10, 8]), True)
        >>> file = io.BytesIO(); torch.save(prefix, file)
        >>> file.tell() < 2_000  # the 10 rows (320 bytes and the file's frame), not 32,000 bytes
        True
    """
    head = tensor[:rows]
    if head.device.type == "cpu" and head.is_contiguous() and not head.requires_grad:
        with contextlib.suppress(TypeError):  # a dtype numpy lacks (bfloat16, ...)
            return torch.from_numpy(head.numpy())
    return head.clone()


def _refused(error: BaseException) -> str:
    """What torch's safe unpickler refused (``GLOBAL posix.system``, say), from its message."""
    for line in str(error).splitlines():
        line = line.strip()
        if "GLOBAL" in line or "WeightsUnpickler" in line or "Unsupported" in line:
            return line.removeprefix("WeightsUnpickler error: ").split(". ")[0].rstrip(".")
    return "a pickled object"


def checksum_path(path: str | os.PathLike) -> Path:
    """Where a checkpoint's SHA-256 is kept: ``<path>.sha256`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def file_digest(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


#: the key under which a checkpoint carries the digest of the rest of its content
DIGEST_KEY = "_content_sha256"
_TRUST_UNSIGNED = contextvars.ContextVar("trust_unsigned", default=False)


def content_digest(state: Mapping) -> str:
    """The SHA-256 of a checkpoint's content: each tensor's dtype, shape and bytes, each other
    value's type and ``repr``, and the containers around them, in order. Independent of how the
    file was written (a zip's layout, its timestamps), so a checkpoint can carry it inside.

    Examples:
        >>> a = {"w": torch.ones(3), "step": 4, "opt": [0.5, None]}
        >>> content_digest(a) == content_digest({"w": torch.ones(3), "step": 4, "opt": [0.5, None]})
        True
        >>> content_digest(a) == content_digest({**a, "w": torch.tensor([1.0, 1.0, 1.5])})
        False
    """
    digest = hashlib.sha256()

    def walk(node) -> None:
        if isinstance(node, Tensor):
            flat = node.detach().cpu().contiguous().reshape(-1)
            digest.update(f"T{node.dtype}{tuple(node.shape)}".encode())
            digest.update(flat.view(torch.uint8).numpy().data if flat.numel() else b"")
        elif isinstance(node, np.ndarray):
            digest.update(f"A{node.dtype}{node.shape}".encode())
            digest.update(np.ascontiguousarray(node).tobytes())
        elif isinstance(node, Mapping):
            digest.update(f"M{len(node)}".encode())
            for key, value in node.items():
                walk(key)
                walk(value)
        elif isinstance(node, list | tuple):
            digest.update(f"{type(node).__name__}{len(node)}".encode())
            for value in node:
                walk(value)
        else:
            digest.update(f"{type(node).__name__}:{node!r};".encode())

    walk(state)
    return digest.hexdigest()


@contextlib.contextmanager
def trusting_unsigned(trust: bool = True):
    """Within it, ``load_checkpoint`` loads a file without a digest (written by hand, elsewhere or
    before digests) instead of refusing it (``checkpoint.trust_unsigned=true``)."""
    token = _TRUST_UNSIGNED.set(trust)
    try:
        yield
    finally:
        _TRUST_UNSIGNED.reset(token)


def _verified(state, path: Path, what: str) -> dict:
    """``state`` without its digest, once it matches; the former format is vouched for by a
    ``.sha256`` beside it; neither: refused unless trusted."""
    if not isinstance(state, dict):
        return state
    recorded = state.pop(DIGEST_KEY, None)
    if recorded is not None:
        if content_digest(state) != recorded:
            raise ValueError(
                f"{what} does not match the digest it was saved with: its content changed "
                "since (a disk error, a copy cut short, an edit). Loading it would continue "
                "from values the run never had; start the run afresh (resume=false), or point "
                "resume at a copy that matches.")
        return state
    sidecar = checksum_path(path)
    if sidecar.exists():
        if file_digest(path) not in sidecar.read_text().split():
            raise ValueError(
                f"{what} does not match the checksum written with it ({sidecar.name}): its "
                "bytes changed since it was saved (a disk error, a copy cut short, an edit). "
                "Loading it would continue from values the run never had; start the run afresh "
                "(resume=false), or point resume at a copy whose checksum matches.")
        return state
    if _TRUST_UNSIGNED.get():
        return state
    raise ValueError(
        f"{what} carries no digest of its content, nor a .sha256 beside it: it was written by "
        "hand, by another program, or by this library before 2026-12-07 and copied without its "
        ".sha256, so a damaged copy cannot be told from a sound one. If you trust it, load it "
        "with checkpoint.trust_unsigned=true (evaluate.py: --trust-unsigned).")


def load_checkpoint(path: str | os.PathLike, *, what: str | None = None,
                    advice: str = "Start the run afresh (resume=false) or point resume at "
                                  "another checkpoint.") -> dict:
    """``torch.load(path, weights_only=True, mmap=True)`` (a pool of GiB is not read into a second
    copy), its digest checked, with a message naming the file (or ``what``), what went wrong and
    ``advice``."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu", mmap=True)
    except Exception as error:
        size = Path(path).stat().st_size if Path(path).exists() else None
        if size is None:
            cause = "there is no file there"
        elif size == 0:
            cause = "the file is empty (0 bytes): its writer was killed before writing it"
        elif isinstance(error, pickle.UnpicklingError) and str(error).startswith(
                "Weights only load failed"):
            # torch's own text advises weights_only=False, which would run the file's code:
            # only its line naming what was refused is kept
            cause = (f"it holds objects other than tensors and plain values ({_refused(error)})"
                     "; it was not written by this library, or by an older version of it, and "
                     "loading it otherwise could run code it names")
        else:
            first = (str(error).splitlines() or [""])[0][:300]
            cause = f"{type(error).__name__}: {first}" if first else type(error).__name__
            cause += "; it is damaged (cut off or overwritten) or not a checkpoint"
        raise RuntimeError(
            f"cannot load {what or f'the checkpoint {str(path)!r}'}: {cause}. {advice}") from None
    return _verified(state, Path(path), what or f"the checkpoint {str(path)!r}")
