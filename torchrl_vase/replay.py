"""A replay buffer's share of a run's checkpoint, written as the buffer grows.

A replay buffer is most of an off-policy run's state (1 M HalfCheetah transitions: 200 MB; the
bonus's pool of Ant under TRPO: 3 GB). ``ReplayJournal`` writes at each checkpoint only the
transitions added since the previous one, as a chunk file of its own, and puts the write count
in the checkpoint. Loading rebuilds the buffer exactly (every transition in its slot, the cursor
where it was); chunks no checkpoint can need are deleted. A chunk is written (atomically) before
the checkpoint that counts it, so the two agree whenever a process is killed.

Examples:
    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
    >>> def batch(start):
    ...     return TensorDict({"x": torch.arange(start, start + 3.0)[:, None]}, [3])
    >>> directory = tempfile.mkdtemp()
    >>> buffer = ReplayBuffer(storage=LazyTensorStorage(5))
    >>> journal = ReplayJournal(buffer, directory)
    >>> _ = buffer.extend(batch(0)); state = journal.state_dict()  # writes transitions 0-2
    >>> _ = buffer.extend(batch(3)); state = journal.state_dict()  # writes 3-5 (5 wraps to slot 0)
    >>> restored = ReplayBuffer(storage=LazyTensorStorage(5))
    >>> ReplayJournal(restored, directory).load_state_dict(state)
    >>> restored.storage.get(torch.arange(5))["x"].flatten().tolist()
    [5.0, 1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import torch
from tensordict import TensorDict
from torchrl.data import ReplayBuffer

from torchrl_vase.checkpointing import Checkpointer, check_writable, checksum_path, load_checkpoint

__all__ = ["ReplayJournal"]

_CHUNK = re.compile(r"^chunk-(\d+)-(\d+)\.pt$")


class ReplayJournal:
    """Checkpoints ``buffer`` (a ring storage, the default writer) by appending: ``state_dict()``
    writes the transitions added since its previous call and returns the write count;
    ``load_state_dict`` rebuilds the buffer from the files. Pass it as the loop's ``state`` entry.

    Args:
        buffer: the replay buffer (written as stored).
        directory: the run's chunk directory (``None``: ``attach`` one before the first use)."""

    def __init__(self, buffer: ReplayBuffer, directory: str | os.PathLike | None = None) -> None:
        if not isinstance(buffer, ReplayBuffer):
            raise TypeError(f"buffer must be a torchrl ReplayBuffer, got {type(buffer).__name__}.")
        self.buffer = buffer
        self.capacity = int(buffer.storage.max_size)
        self.directory: Path | None = None
        # the write count at the last state_dict: the committed checkpoint's, whose chunks are
        # kept until the next one replaces it
        self._saved = 0
        if directory is not None:
            self.attach(directory)

    def attach(self, directory: str | os.PathLike) -> None:
        """Write the chunks to ``directory`` (created and checked now); a new directory gets every
        transition at the next ``state_dict``."""
        directory = check_writable(directory, "replay buffer directory")
        if directory != self.directory:
            self._saved = 0
        self.directory = directory

    @property
    def write_count(self) -> int:
        """Transitions ever written to the buffer (its writer's count)."""
        return int(self.buffer.writer.state_dict()["_write_count"])

    def state_dict(self) -> dict:
        """Write the transitions added since the previous call (at most the buffer's capacity:
        older ones are overwritten) and return ``{"write_count", "capacity"}``."""
        directory = self._directory()
        written = self.write_count
        first = max(self._saved, written - self.capacity)
        if written > first:
            slots = torch.arange(first, written) % self.capacity
            rows = self.buffer.storage.get(slots)
            Checkpointer(directory, f"chunk-{first:012d}-{written:012d}.pt").save(rows.to_dict())
        # no checkpoint after this one needs what was overwritten before the previous one
        for _, end, path in self._chunks():
            if end <= self._saved - self.capacity:
                _remove(path)
        self._saved = written
        return {"write_count": written, "capacity": self.capacity}

    def load_state_dict(self, state: dict) -> None:
        """The buffer as at ``state_dict()`` (transitions in their slots, cursor, count); later
        chunks deleted. The buffer's size must be the saved one's unless neither was filled."""
        written, capacity = int(state["write_count"]), int(state["capacity"])
        # a buffer that never wrapped has the same layout at any size that holds it (a run
        # resumed with more iterations reserves more)
        if capacity != self.capacity and written > min(capacity, self.capacity):
            raise ValueError(f"the checkpoint's replay buffer held {capacity} transitions, this "
                             f"one {self.capacity}, and {written} were written: resume with the "
                             "same buffer size.")
        for start, _, path in self._chunks():
            if start >= written:  # written by a process killed before its checkpoint
                _remove(path)
        first = max(0, written - self.capacity)
        plan, covered = [], first  # (chunk, its rows to take): found whole before any change
        for start, end, path in self._chunks():
            if end <= covered:
                continue
            if start > covered:
                break
            taken = min(end, written)
            plan.append((path, covered - start, taken - start))
            covered = taken
        if covered != written:
            raise FileNotFoundError(
                f"the replay buffer's chunks in {self.directory} hold its transitions up to "
                f"{covered} of {written}: a chunk is missing (deleted, or the checkpoint was "
                "moved without its directory).")
        # the writer set at transition ``first``'s slot, each chunk extends the buffer from
        # there (slot = number mod capacity, wrapping as it did): in memory the buffer and one
        # chunk, never a second copy of a pool of gigabytes
        self.buffer.empty()
        self.buffer.writer.load_state_dict(
            {"_cursor": first % self.capacity, "_write_count": first})
        for path, begin, stop in plan:
            rows = TensorDict(load_checkpoint(path, what=f"the replay chunk {path}"))
            self.buffer.extend(rows.auto_batch_size_(batch_dims=1)[begin:stop])
        self._saved = written

    def reset(self) -> None:
        """Forget what was written (the buffer was restored whole by other means): the chunks are
        deleted and the next ``state_dict`` writes anew."""
        for _, _, path in self._chunks():
            _remove(path)
        self._saved = 0

    def _directory(self) -> Path:
        if self.directory is None:
            raise RuntimeError("ReplayJournal has no directory: attach(directory) first.")
        return self.directory

    def _chunks(self) -> list[tuple[int, int, Path]]:
        """The chunk files, by their first transition."""
        found = []
        for path in self._directory().iterdir():
            match = _CHUNK.match(path.name)
            if match:
                found.append((int(match[1]), int(match[2]), path))
        return sorted(found)


def _remove(chunk: Path) -> None:
    """A chunk and the checksum written beside it (``Checkpointer``), whichever exist."""
    for path in (chunk, checksum_path(chunk)):
        with contextlib.suppress(OSError):
            path.unlink()
