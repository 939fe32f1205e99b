"""torchrl_vase.checkpointing: run identity, atomic checkpoints, RNG state, signals."""

import errno
import os
import pickle
import random
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from torchrl_vase.checkpointing import (
    _NEARLY_FULL,
    Checkpointer,
    _refused,
    check_writable,
    config_identity,
    content_digest,
    file_digest,
    load_checkpoint,
    rng_state,
    saveable_prefix,
    set_rng_state,
    trusting_unsigned,
)
from torchrl_vase.loop import StopSignals


def test_identity_ignores_the_listed_keys_and_key_order_only():
    config = {"seed": 0, "surprise": {"delta": 0.01, "eta": 1e-4}, "resume": False,
              "checkpoint": {"every": 10}}
    same = {"checkpoint": {"every": 1}, "resume": True,
            "surprise": {"eta": 1e-4, "delta": 0.01}, "seed": 0}
    ignore = ["resume", "checkpoint"]
    assert config_identity(config, ignore) == config_identity(same, ignore)
    other_delta = {**config, "surprise": {"delta": 0.0, "eta": 1e-4}}
    assert config_identity(config, ignore) != config_identity(other_delta, ignore)
    assert config_identity(config) != config_identity(same)  # nothing ignored


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    torch.manual_seed(3)
    np.random.seed(3)  # noqa: NPY002
    random.seed(3)
    np.random.standard_normal()  # noqa: NPY002  (a cached Gaussian is part of the state)
    Checkpointer(tmp_path).save({"rng": rng_state()})
    expected = (torch.rand(3), np.random.standard_normal(2), random.random())  # noqa: NPY002
    set_rng_state(Checkpointer(tmp_path).load()["rng"])
    got = (torch.rand(3), np.random.standard_normal(2), random.random())  # noqa: NPY002
    assert torch.equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    assert expected[2] == got[2]


def test_a_torn_write_leaves_the_previous_checkpoint_and_the_next_save_cleans_up(tmp_path):
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save({"step": torch.tensor(1)})

    class Unsaveable:
        pass

    with pytest.raises(Exception):  # noqa: B017  (pickling fails midway through the write)
        checkpointer.save({"step": torch.tensor(2), "bad": Unsaveable()})
    assert int(checkpointer.load()["step"]) == 1
    (tmp_path / ".last.pt.dead.tmp").write_bytes(b"half a checkpoint")  # a killed writer's
    checkpointer.save({"step": torch.tensor(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert int(checkpointer.load()["step"]) == 3
    assert oct(os.stat(checkpointer.path).st_mode & 0o777) == oct(0o600)


def _flip(path, weight) -> None:
    """Four floats of ``weight`` set to 7.0 inside the file: torch loads it without a word."""
    data = path.read_bytes()
    at = data.index(weight[100:104].numpy().tobytes())
    path.write_bytes(data[:at] + torch.full((4,), 7.0).numpy().tobytes() + data[at + 16:])
    assert torch.load(path, weights_only=True)["actor"]["weight"][100:104].tolist() == [7.0] * 4


def test_a_checkpoint_whose_tensor_bytes_changed_is_refused_wherever_it_was_copied(tmp_path):
    checkpointer = Checkpointer(tmp_path / "run")
    weight = torch.arange(1000, dtype=torch.float32)
    checkpointer.save({"actor": {"weight": weight}, "step": 3})
    loaded = checkpointer.load()
    torch.testing.assert_close(loaded["actor"]["weight"], weight)
    assert set(loaded) == {"actor", "step"}  # the digest is the file's, not the state's
    copy = tmp_path / "elsewhere" / "last.pt"  # the file alone, as a user copies it
    copy.parent.mkdir()
    shutil.copy(checkpointer.path, copy)
    for path in (checkpointer.path, copy):
        _flip(path, weight)
        with pytest.raises(ValueError, match=r"does not match the digest it was saved with: "
                                             r"its content changed"):
            load_checkpoint(path)
        with pytest.raises(ValueError, match="does not match the digest"), trusting_unsigned():
            load_checkpoint(path)  # trusting an unsigned file is not trusting a damaged one


def test_a_checkpoint_without_a_digest_is_refused_unless_trusted(tmp_path):
    weight = torch.arange(1000, dtype=torch.float32)
    path = tmp_path / "last.pt"
    torch.save({"actor": {"weight": weight}}, path)  # by hand: no digest inside
    with pytest.raises(ValueError, match=r"carries no digest of its content, nor a \.sha256 "
                                         r"beside it.*checkpoint\.trust_unsigned=true"):
        load_checkpoint(path)
    with trusting_unsigned():
        torch.testing.assert_close(load_checkpoint(path)["actor"]["weight"], weight)
    with pytest.raises(ValueError, match="carries no digest"):  # only within the context
        load_checkpoint(path)
    # the former format: its .sha256 beside it vouches for its bytes, and refuses a change
    (tmp_path / "last.pt.sha256").write_text(file_digest(path) + "\n")
    torch.testing.assert_close(load_checkpoint(path)["actor"]["weight"], weight)
    _flip(path, weight)
    with pytest.raises(ValueError, match=r"does not match the checksum written with it "
                                         r"\(last\.pt\.sha256\): its bytes changed"):
        load_checkpoint(path)
    # the next save writes the digest inside and drops the former file's .sha256
    Checkpointer(tmp_path).save({"step": torch.tensor(1)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert int(load_checkpoint(path)["step"]) == 1


@pytest.mark.parametrize("umask", [0o077, 0o022, 0o002])
def test_a_checkpoint_and_its_directory_are_private_whatever_the_umask(tmp_path, umask):
    before = os.umask(umask)
    try:
        path = Checkpointer(tmp_path / "run").save({"step": torch.tensor(1)})
    finally:
        os.umask(before)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700


class _RunsACommand:
    def __reduce__(self):
        return os.system, ("true",)


def test_loading_refuses_pickled_objects(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"object": Checkpointer}, path)  # a class: code a full unpickler would import
    refused = (r"cannot load the checkpoint .*evil\.pt': it holds objects other than tensors "
               r"and plain values \(Unsupported global: GLOBAL "
               r"torchrl_vase\.checkpointing\.Checkpointer")
    with pytest.raises(RuntimeError, match=refused) as error:
        load_checkpoint(path)
    # torch's advice to load with weights_only=False (running the file's code) is not quoted
    assert "weights_only" not in str(error.value)
    torch.save({"state": _RunsACommand()}, path)  # torch 2.13 words this refusal otherwise
    with pytest.raises(RuntimeError, match=r"other than tensors and plain values \(Trying to "
                                           r"load unsupported GLOBAL posix\.system") as error:
        load_checkpoint(path)
    assert "weights_only" not in str(error.value) and "trusted source" not in str(error.value)
    path.write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"evil\.pt': the file is empty \(0 bytes\)"):
        load_checkpoint(path)
    torch.save({"step": torch.tensor(1)}, path)
    path.write_bytes(path.read_bytes()[:50])  # cut off
    with pytest.raises(RuntimeError, match=r"evil\.pt': .*; it is damaged \(cut off or "
                                           r"overwritten\) or not a checkpoint"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Checkpointer(tmp_path / "empty").load()


def test_an_unwritable_directory_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(PermissionError, match=r"checkpoint.dir: cannot write to .*file/run"):
        check_writable(blocker / "run", "checkpoint.dir")


def test_the_first_signal_asks_to_stop_the_second_interrupts():
    previous = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert stop.received is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received == "SIGTERM"
        with pytest.raises(KeyboardInterrupt, match="second SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_a_saveable_prefix_is_its_rows_in_the_file_and_shares_memory_where_it_can(tmp_path,
                                                                                  dtype):
    pool = (torch.arange(4000) % 7).reshape(1000, 4).to(dtype)
    prefix = saveable_prefix(pool, 10)
    assert torch.equal(prefix, pool[:10])
    shared = dtype is not torch.bfloat16  # numpy has no bfloat16: cloned
    assert (prefix.data_ptr() == pool.data_ptr()) == shared
    Checkpointer(tmp_path).save({"rows": prefix})
    # the 10 rows, the file's frame and its digest, far below the 1,000 rows (16,000 to 32,000
    # bytes) torch.save writes of pool[:10]
    assert (tmp_path / "last.pt").stat().st_size < 3_000
    loaded = load_checkpoint(tmp_path / "last.pt")["rows"]
    assert loaded.dtype == dtype and torch.equal(loaded, pool[:10])
    strided = pool[:, :2]  # not contiguous: cloned, still only its rows
    assert torch.equal(saveable_prefix(strided, 5), pool[:5, :2])
    assert saveable_prefix(strided, 5).data_ptr() != pool.data_ptr()


def test_a_loaded_checkpoint_s_tensors_are_private_memory_maps_of_the_file(tmp_path):
    Checkpointer(tmp_path).save({"weights": torch.ones(1000)})
    loaded = load_checkpoint(tmp_path / "last.pt")["weights"]
    maps = Path("/proc/self/maps")
    if maps.exists():  # Linux: the file is mapped, not read into a second copy in memory
        assert str(tmp_path / "last.pt") in maps.read_text()
    loaded += 1  # writes stay in memory (copy-on-write), never reach the file
    assert torch.equal(load_checkpoint(tmp_path / "last.pt")["weights"], torch.ones(1000))
    Checkpointer(tmp_path).save({"weights": torch.zeros(1000)})  # replaced while mapped
    assert torch.equal(loaded, torch.full((1000,), 2.0))
    assert torch.equal(load_checkpoint(tmp_path / "last.pt")["weights"], torch.zeros(1000))


def test_a_full_disk_is_named_with_its_path_and_the_previous_checkpoint_kept(tmp_path,
                                                                           monkeypatch):
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save({"step": torch.tensor(1)})
    real_save = torch.save

    def full_disk(state, file):  # what a write on a full disk raises, part of the file written
        file.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match=rf"no space left on the disk of {tmp_path} to write the "
                                      r"checkpoint last\.pt \(\d+ MiB free .*\); the previous "
                                      r"checkpoint is intact") as error:
        checkpointer.save({"step": torch.tensor(2)})
    assert error.value.errno == errno.ENOSPC
    # torch's own writer words it "unexpected pos": taken for a full disk when the disk is
    def torn(state, file):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 154304 "
                           "vs 154192")

    monkeypatch.setattr(torch, "save", torn)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1 << 20))
    with pytest.raises(OSError, match=r"no space left on the disk"):
        checkpointer.save({"step": torch.tensor(3)})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1 << 40))
    with pytest.raises(RuntimeError, match=r"unexpected pos"):  # room enough: not the disk
        checkpointer.save({"step": torch.tensor(4)})
    monkeypatch.setattr(torch, "save", real_save)
    assert int(checkpointer.load()["step"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


# -- What mutation testing found unasserted (issue 100): each refusal read whole

AFRESH = "Start the run afresh (resume=false) or point resume at another checkpoint."


def test_each_refusal_to_load_says_the_whole_reason(tmp_path):
    weight = torch.arange(1000, dtype=torch.float32)
    path = tmp_path / "last.pt"
    what = f"the checkpoint {str(path)!r}"

    def refused(error, message):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            load_checkpoint(path)

    Checkpointer(tmp_path).save({"actor": {"weight": weight}})
    _flip(path, weight)
    changed = (f"{what} does not match the digest it was saved with: its content changed since "
               "(a disk error, a copy cut short, an edit). Loading it would continue from "
               "values the run never had; start the run afresh (resume=false), or point resume "
               "at a copy that matches.")
    refused(ValueError, changed)
    torch.save({"actor": {"weight": weight}}, path)
    unsigned = (f"{what} carries no digest of its content, nor a .sha256 beside it: it was "
                "written by hand, by another program, or by this library before 2026-12-07 and "
                "copied without its .sha256, so a damaged copy cannot be told from a sound one. "
                "If you trust it, load it with checkpoint.trust_unsigned=true (evaluate.py: "
                "--trust-unsigned).")
    refused(ValueError, unsigned)
    (tmp_path / "last.pt.sha256").write_text(file_digest(path) + "\n")
    _flip(path, weight)
    sidecar = (f"{what} does not match the checksum written with it (last.pt.sha256): its "
               "bytes changed since it was saved (a disk error, a copy cut short, an edit). "
               "Loading it would continue from values the run never had; start the run afresh "
               "(resume=false), or point resume at a copy whose checksum matches.")
    refused(ValueError, sidecar)
    (tmp_path / "last.pt.sha256").unlink()
    path.write_bytes(b"")
    empty = (f"cannot load {what}: the file is empty (0 bytes): its writer was killed before "
             f"writing it. {AFRESH}")
    refused(RuntimeError, empty)
    torch.save({"object": Checkpointer}, path)
    pickled = (f"^{re.escape(f'cannot load {what}: it holds objects other than tensors and ')}"
               r"plain values \(Unsupported global: GLOBAL torchrl_vase\.checkpointing\."
               r"Checkpointer[^)]*\); it was not written by this library, or by an older "
               r"version of it, and loading it otherwise could run code it names\. "
               f"{re.escape(AFRESH)}$")
    with pytest.raises(RuntimeError, match=pickled):
        load_checkpoint(path)
    torch.save({"step": torch.tensor(1)}, path)
    path.write_bytes(path.read_bytes()[:50])
    damaged = (f"^{re.escape(f'cannot load {what}: ')}[A-Za-z]+Error: [^\n]+; it is damaged "
               r"\(cut off or overwritten\) or not a checkpoint\. "
               f"{re.escape(AFRESH)}$")
    with pytest.raises(RuntimeError, match=damaged):
        load_checkpoint(path)
    with pytest.raises(RuntimeError, match=re.escape("cannot load the saved run: the file is "
                                                     "empty")):
        path.write_bytes(b"")
        load_checkpoint(path, what="the saved run")


def test_an_unwritable_directory_is_named_whole(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "run"
    message = (f"checkpoint.dir: cannot write to {str(target)!r} (Not a directory). Choose a "
               "writable directory.")
    with pytest.raises(OSError, match=f"^{re.escape(message)}$"):
        check_writable(target, "checkpoint.dir")


def test_a_full_disk_is_told_from_torchs_wordings_and_its_message_is_whole(tmp_path,
                                                                         monkeypatch):
    checkpointer = Checkpointer(tmp_path)
    checkpointer.save({"step": torch.tensor(1)})
    asked, free = [], {"bytes": 5 * 2**20}
    usage = shutil.disk_usage(tmp_path)

    def disk_usage(path):
        asked.append(Path(path))
        return usage._replace(free=free["bytes"])

    def failing(error):
        def save(state, file):
            raise error
        return save

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    whole = (f"no space left on the disk of {tmp_path} to write the checkpoint last.pt (5 MiB "
             "free once the partial file is removed); the previous checkpoint is intact. Free "
             "space there (or move checkpoint.dir), then continue with resume=true")
    for wording in ("[enforce fail at inline_container.cc:672] . unexpected pos 154304 vs 1541",
                    "[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed "
                    "writing file data/0: file write failed"):
        monkeypatch.setattr(torch, "save", failing(RuntimeError(wording)))
        with pytest.raises(OSError) as error:
            checkpointer.save({"step": torch.tensor(2)})
        assert error.value.errno == errno.ENOSPC and error.value.strerror == whole
    assert asked and set(asked) == {tmp_path}  # the checkpoint's own disk
    free["bytes"] = _NEARLY_FULL  # as much room as "nearly full" means: not the disk
    with pytest.raises(RuntimeError, match="failed writing"):
        checkpointer.save({"step": torch.tensor(3)})
    free["bytes"] = 0
    for other in (ValueError("unexpected pos 1 vs 2"), TypeError("cannot pickle 'generator'")):
        monkeypatch.setattr(torch, "save", failing(other))
        with pytest.raises(type(other), match=re.escape(str(other))):
            checkpointer.save({"step": torch.tensor(4)})


def test_a_partial_write_sits_beside_the_checkpoint_under_the_name_the_next_save_sweeps(
        tmp_path, monkeypatch):
    checkpointer = Checkpointer(tmp_path / "run")
    seen = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: seen.append(
        sorted(p.name for p in (tmp_path / "run").iterdir())) or real_fsync(fd))
    checkpointer.save({"step": torch.tensor(1)})
    (partial,) = seen[0]
    assert re.fullmatch(r"\.last\.pt\.[^/]+\.tmp", partial)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*"))


def test_a_signal_just_after_the_rename_is_raised_as_itself(tmp_path, monkeypatch):
    checkpointer = Checkpointer(tmp_path)
    real_replace = os.replace

    def replaced_then_interrupted(source, target):
        real_replace(source, target)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replaced_then_interrupted)
    with pytest.raises(KeyboardInterrupt):  # not the missing temporary file's error
        checkpointer.save({"step": torch.tensor(5)})
    monkeypatch.setattr(os, "replace", real_replace)
    assert int(checkpointer.load()["step"]) == 5


def test_the_write_check_creates_nested_folders_and_writes_inside_the_folder_it_checks(
        tmp_path):
    nested = tmp_path / "a" / "b" / "c"
    assert check_writable(nested, "checkpoint.dir") == nested and nested.is_dir()
    assert list(nested.iterdir()) == []  # the check's file is gone
    # /proc exists and takes no new file, even from root: the check must write in it
    with pytest.raises(PermissionError) as refused:
        Checkpointer("/proc")
    assert str(refused.value) == ("checkpoint directory: cannot write to '/proc' (No such file "
                                  "or directory). Choose a writable directory.")


def test_identity_reads_nested_ignores_lists_and_any_value_and_is_twelve_hex_digits():
    config = {"a": {"b": 1, "c": 2}, "runs": [{"seed": 0, "tag": "x"}], "where": Path("/x")}
    identity = config_identity(config, ["a.b", "runs.tag"])
    assert re.fullmatch(r"[0-9a-f]{12}", identity)
    assert identity == config_identity(
        {"a": {"b": 9, "c": 2}, "runs": [{"seed": 0, "tag": "y"}], "where": Path("/x")},
        ["a.b", "runs.tag"])
    for changed in ({"a": {"b": 1, "c": 3}}, {"runs": [{"seed": 1, "tag": "x"}]},
                    {"where": Path("/y")}):
        assert config_identity({**config, **changed}, ["a.b", "runs.tag"]) != identity
    assert len(config_identity(config, length=20)) == 20


def test_the_digest_tells_a_list_from_a_tuple():
    assert content_digest({"opt": [1, 2]}) != content_digest({"opt": (1, 2)})


def test_a_load_that_fails_says_why_in_the_loaders_own_first_line(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    what = f"the checkpoint {str(path)!r}"
    with pytest.raises(RuntimeError) as missing:
        load_checkpoint(path)
    assert str(missing.value) == f"cannot load {what}: there is no file there. {AFRESH}"
    path.write_bytes(b"something")
    damaged = "; it is damaged (cut off or overwritten) or not a checkpoint. " + AFRESH
    for error, said in ((RuntimeError(), "RuntimeError"),
                        (RuntimeError("x" * 400 + "\nsecond line"), "RuntimeError: " + "x" * 300),
                        (pickle.UnpicklingError("invalid load key, 'x'."),
                         "UnpicklingError: invalid load key, 'x'.")):
        def load(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(torch, "load", load)
        with pytest.raises(RuntimeError) as refused:
            load_checkpoint(path)
        assert str(refused.value) == f"cannot load {what}: {said}{damaged}"


@pytest.mark.parametrize(("message", "quoted"), [
    ("Weights only load failed. ...\nWeightsUnpickler error: Unsupported operand 149.\n\nCheck",
     "Unsupported operand 149"),
    ("Weights only load failed.\n  Unsupported global: GLOBAL a.B was not an allowed global. "
     "Please", "Unsupported global: GLOBAL a.B was not an allowed global"),
    ("Weights only load failed.\nWeightsUnpickler error: bad opcode.", "bad opcode"),
    ("Weights only load failed.\n\nUnsupported operand 149\nCheck the documentation",
     "Unsupported operand 149"),
    ("WeightsUnpickler error: Unsupported global: GLOBAL mylib.BOX", "Unsupported global: "
     "GLOBAL mylib.BOX"),
    ("Weights only load failed. Something else entirely.", "a pickled object"),
])
def test_what_the_unpickler_refused_is_quoted_from_its_message(message, quoted):
    assert _refused(pickle.UnpicklingError(message)) == quoted


def test_a_stale_partial_file_removed_by_another_hand_meanwhile_is_no_error(tmp_path,
                                                                            monkeypatch):
    checkpointer = Checkpointer(tmp_path)
    stale = tmp_path / ".last.pt.dead.tmp"
    stale.write_bytes(b"half a checkpoint")
    real_unlink = Path.unlink

    def raced(path, *args, **kwargs):  # gone between the sweep's listing and its unlink
        if path.name == stale.name:
            real_unlink(path)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", raced)
    assert checkpointer.save({"step": torch.tensor(1)}) == tmp_path / "last.pt"
    assert not stale.exists() and int(checkpointer.load()["step"]) == 1
