"""Binders: how a node agent hands GPUs to a job on its node, and its record of what is bound.

A binder is the only thing in the node agent that touches the node. `FileBinder` writes one
env file per job (what a launcher sources before starting the job); `HookBinder` runs an
operator's command. Both keep a record on disk (`bound()`), so a restarted node agent can
reconcile what the node really holds with the latest commit. Event data never reaches a shell:
ids become file names through an escaping that admits no path separators, and hook arguments
are passed as an argv list.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Protocol

SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
SUFFIX = ".env"
MAX_NAME = 240  # file names are at most 255 bytes on common file systems


class BindError(Exception):
    """The binder could not bind or release a job (the node agent reports it as `failed`)."""


class Binder(Protocol):
    def bind(self, job_id: str, local_ids: list[int], global_ids: list[int]) -> None:
        """Give the job these GPUs (replacing any it held): local device ids and pool-global ones."""

    def release(self, job_id: str) -> None:
        """Take the job's GPUs back (the pool ended it: completed, cancelled, failed, past its
        time limit); releasing an unknown job is not an error."""

    def shrink(self, job_id: str, local_ids: list[int]) -> None:
        """A real-time app gives up these GPUs and keeps the rest (a `bind` of its new set follows):
        stop what it ran on them."""

    def bound(self) -> dict[str, list[int]]:
        """What is bound now: job id -> local ids, from the binder's own record."""


def file_name(job_id: str) -> str:
    """A safe file name for a job id: bytes outside [A-Za-z0-9._-] and a leading '.' become %XX,
    so no name is hidden, '.', '..' or contains a separator. Empty or too long ids are refused."""
    if not job_id:
        raise BindError("job id: must not be empty")
    try:
        raw = job_id.encode("utf-8")
    except UnicodeEncodeError:
        raise BindError(f"job id: {job_id!r} is not valid UTF-8") from None
    name = "".join(
        chr(b) if chr(b) in SAFE and not (i == 0 and b == ord(".")) else f"%{b:02X}" for i, b in enumerate(raw)
    )
    if len(name) + len(SUFFIX) > MAX_NAME:
        raise BindError(f"job id: too long for a file name ({len(raw)} bytes)")
    return name + SUFFIX


def job_of(name: str) -> str | None:
    """The job id a file name encodes (the inverse of `file_name`), None if it is not one."""
    if not name.endswith(SUFFIX) or name.startswith("."):
        return None
    stem, out, i = name[: -len(SUFFIX)], bytearray(), 0
    try:
        while i < len(stem):
            if stem[i] == "%":
                out.append(int(stem[i + 1 : i + 3], 16))
                i += 3
            else:
                out.append(ord(stem[i]))
                i += 1
        return out.decode("utf-8") or None
    except (ValueError, UnicodeDecodeError):
        return None


def check_env_safe(job_id: str) -> None:
    """Refuse ids with control characters: a newline would break the env file's lines."""
    file_name(job_id)
    if any(ord(c) < 32 or ord(c) == 127 for c in job_id):
        raise BindError(f"job id: {job_id!r} contains control characters (unsafe in an env file)")


def _ids(ids: list[int]) -> str:
    return ",".join(str(int(i)) for i in ids)


class FileBinder:
    """One env file per job in `directory`: `CUDA_VISIBLE_DEVICES=<local ids>`, `GPUALLOC_JOB`
    (shell-quoted) and `GPUALLOC_GPUS=<global ids>`. Written atomically (tmp + os.replace), so a
    launcher never reads half a file; the files themselves are the record `bound()` returns.
    A release removes the file and stops nothing itself: a launcher that sourced it watches for
    its removal to kill the job."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_of(self, job_id: str) -> Path:
        return self.directory / file_name(job_id)

    def bind(self, job_id: str, local_ids: list[int], global_ids: list[int]) -> None:
        check_env_safe(job_id)
        path = self.path_of(job_id)
        text = (
            f"CUDA_VISIBLE_DEVICES={_ids(local_ids)}\n"
            f"GPUALLOC_JOB={shlex.quote(job_id)}\n"
            f"GPUALLOC_GPUS={_ids(global_ids)}\n"
        )
        try:
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            raise BindError(f"writing {path}: {e}") from None

    def release(self, job_id: str) -> None:
        try:
            self.path_of(job_id).unlink(missing_ok=True)
        except OSError as e:
            raise BindError(f"removing {self.path_of(job_id)}: {e}") from None

    def shrink(self, job_id: str, local_ids: list[int]) -> None:
        """Nothing here: the bind that follows rewrites the env file with the set it keeps."""

    def bound(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for path in sorted(self.directory.iterdir()):
            job_id = job_of(path.name)
            if job_id is None or not path.is_file():
                continue
            try:
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.startswith("CUDA_VISIBLE_DEVICES="):
                        value = line.partition("=")[2].strip()
                        out[job_id] = [int(x) for x in value.split(",")] if value else []
            except (OSError, ValueError):
                continue  # unreadable: not in the record; the commit rebinds it if assigned
        return out


class HookBinder:
    """Runs `argv + ["bind", job_id, "<local ids>"]`, `argv + ["release", job_id]` and, when an app
    gives up some of its GPUs here, `argv + ["release", job_id, "<local ids given up>"]` (never through
    a shell; GPUALLOC_GPUS carries the global ids in the environment). A non-zero exit or a
    time-out raises BindError with the tail of stderr. The record is a FileBinder in `state_dir`
    (an in-memory dict without one, which a restart forgets). A bind of a bound job is a re-bind
    with the new set: the hook must accept it. `release` is the hook's stop action: it must kill
    the job's processes on the node (the pool ended it, a time limit included)."""

    def __init__(self, argv: list[str], timeout: float = 30, state_dir: str | os.PathLike[str] | None = None) -> None:
        if not argv:
            raise ValueError("argv: the hook command must not be empty")
        self.argv, self.timeout = list(argv), timeout
        self.record = FileBinder(state_dir) if state_dir is not None else None
        self.memory: dict[str, list[int]] = {}

    def _run(self, args: list[str], env_gpus: str = "") -> None:
        cmd = self.argv + args
        env = {**os.environ, "GPUALLOC_GPUS": env_gpus}
        try:
            subprocess.run(cmd, shell=False, check=True, capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.CalledProcessError as e:
            raise BindError(f"hook {args[0]} exited {e.returncode}: {_tail(e.stderr)}") from None
        except subprocess.TimeoutExpired as e:
            raise BindError(f"hook {args[0]} timed out after {self.timeout}s: {_tail(e.stderr)}") from None
        except OSError as e:
            raise BindError(f"hook {args[0]}: cannot run {self.argv[0]!r}: {e}") from None

    def bind(self, job_id: str, local_ids: list[int], global_ids: list[int]) -> None:
        if self.record is not None:
            check_env_safe(job_id)  # refuse ids the record cannot hold before the hook runs
        self._run(["bind", job_id, _ids(local_ids)], _ids(global_ids))
        if self.record is not None:
            self.record.bind(job_id, local_ids, global_ids)
        else:
            self.memory[job_id] = list(local_ids)

    def shrink(self, job_id: str, local_ids: list[int]) -> None:
        """`release JOB IDS`: the app gives up these local GPUs and keeps the rest (the `bind` of its
        new set follows). A hook that reads no IDS stops the whole app, which that bind restarts."""
        self._run(["release", job_id, _ids(local_ids)])

    def release(self, job_id: str) -> None:
        self._run(["release", job_id])
        if self.record is not None:
            self.record.release(job_id)
        self.memory.pop(job_id, None)

    def bound(self) -> dict[str, list[int]]:
        return self.record.bound() if self.record is not None else dict(self.memory)


def _tail(stderr: str | bytes | None, limit: int = 500) -> str:
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    text = (stderr or "").strip()
    return text[-limit:] if text else "(no stderr)"
