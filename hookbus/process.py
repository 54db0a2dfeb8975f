"""Running a hook's process: own process group, capped output, a deadline that holds.

A utility for runners (the command runner and workflow bash steps use it); the core
itself never calls it. The guarantees:

- the child runs in its own process group, so a timeout kills everything it started
  (SIGTERM, a short grace, then SIGKILL) and the child is always reaped;
- stdout and stderr are read with a cap, concurrently with writing stdin;
- the run ends when the child exits: a grandchild that keeps the pipes open does not hold
  it, and whatever is left in the child's process group is killed then;
- everything is polled on the calling thread: no helper threads.
"""

from __future__ import annotations

import errno
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from hookbus.runners import CancelToken

#: Per stream; past it the process group is killed and the run fails.
MAX_OUTPUT_BYTES = 1024 * 1024
_MAX_POLL_MS = 2**31 - 1

#: Between SIGTERM and SIGKILL on a timeout.
KILL_GRACE_SECONDS = 0.25
#: How long killed group members get to let go of the pipes before escaped holders are sought.
ESCAPE_GRACE_SECONDS = 0.1
_READ_CHUNK = 65536

_GROUP_OPTION: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)
def _find_bash() -> str:
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", "bash")
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return "/bin/bash"


#: Looked up once: a PATH search per spawn would cost every fire.
BASH = _find_bash()


@attrs.frozen
class ProcessResult:
    """How a process ended. ``returncode`` is negative for a signal, None if it never ran."""

    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    cancelled: bool = False
    #: "stdout" or "stderr" when that stream went over the cap.
    overflow: str | None = None
    #: Why the process could not be started.
    spawn_error: str | None = None
    #: The per-stream cap it ran under, for the overflow message.
    output_cap: int = MAX_OUTPUT_BYTES

    def failure(self, timeout_text: str, cancel_reason: str) -> str | None:
        """Why the process gave no exit status to decide by, as a recorded error says it;
        None when it exited (or was killed by a signal) on its own.

        ``timeout_text`` is what a timeout is called (``"timed out after 5s"``) and
        ``cancel_reason`` what a cancellation is, since only the runner knows them.
        """
        if self.spawn_error:
            return self.spawn_error
        if self.cancelled:
            return cancel_reason
        if self.timed_out:
            return timeout_text
        if self.overflow:
            return f"{self.overflow} went over {_size(self.output_cap)}; the process was killed"
        return None


def _size(count: int) -> str:
    mib, rest = divmod(count, 1024 * 1024)
    return f"{mib} MiB" if mib and not rest else f"{count:,} bytes"


def run_bash(
    command: str,
    *,
    input: bytes,
    cwd: Path,
    env: Mapping[str, str],
    deadline: float,
    cancel: CancelToken | None = None,
    output_cap: int = MAX_OUTPUT_BYTES,
) -> ProcessResult:
    """``bash -c command`` with ``input`` on stdin, until it exits or ``deadline`` passes."""
    return run_process(
        [BASH, "-c", command],
        input=input,
        cwd=cwd,
        env=env,
        deadline=deadline,
        cancel=cancel,
        output_cap=output_cap,
    )


def run_process(
    argv: Sequence[str],
    *,
    input: bytes,
    cwd: Path,
    env: Mapping[str, str],
    deadline: float,
    cancel: CancelToken | None = None,
    output_cap: int = MAX_OUTPUT_BYTES,
) -> ProcessResult:
    """Run ``argv`` in a new process group under the guarantees of this module."""
    if cancel is not None and cancel.cancelled:
        return ProcessResult(None, cancelled=True)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            close_fds=True,
            **_GROUP_OPTION,
        )
    except OSError as exc:
        return ProcessResult(None, spawn_error=_describe_spawn_error(exc, argv, cwd))
    return _Supervision(proc, input, deadline, cancel, output_cap).run()


def _describe_spawn_error(exc: OSError, argv: Sequence[str], cwd: Path) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not cwd.is_dir():
        problem = "is not a directory" if os.path.lexists(cwd) else "does not exist"
        return f"could not start: working directory {cwd} {problem}"
    return f"could not start {argv[0]}: {exc.strerror or exc}"


def signal_group(pgid: int, signum: int) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class _Supervision:
    """One process from spawn to reap. Private: ``run_process`` is the interface."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        input: bytes,
        deadline: float,
        cancel: CancelToken | None,
        output_cap: int,
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.deadline = deadline
        self.cancel = cancel
        self.output_cap = output_cap
        self.pending = memoryview(input)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.stdin_fd: int | None = proc.stdin.fileno()
        self.readers = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        self.chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.sizes = {"stdout": 0, "stderr": 0}
        self.overflow: str | None = None
        self.poller = select.poll()
        self.pidfd = _open_pidfd(self.pid)
        # Guards the group id: once the child is reaped, a late cancel must not signal it.
        self.reap_lock = threading.Lock()
        self.reaped = False
        self.killed_by_cancel = False

    def _kill_on_cancel(self) -> None:
        with self.reap_lock:
            if not self.reaped:
                self.killed_by_cancel = True
                signal_group(self.pid, signal.SIGKILL)

    def run(self) -> ProcessResult:
        # Registered before anything can block, so close() can always reach this group.
        forget_cancel = (
            self.cancel.on_cancel(self._kill_on_cancel) if self.cancel is not None else None
        )
        timed_out = False
        try:
            for fd in self.readers:
                os.set_blocking(fd, False)
                self.poller.register(fd, select.POLLIN)
            self._start_writing()
            if self.pidfd is not None:
                self.poller.register(self.pidfd, select.POLLIN)
            timed_out = not self._pump()
            if timed_out or self.overflow:
                self._kill_group(graceful=timed_out)
            else:
                self._drain()
                # Leftovers of the group die with the hook; the child, unreaped, keeps the
                # group id from being reused until this signal is sent.
                signal_group(self.pid, signal.SIGKILL)
            if self.readers:
                self._kill_escaped_holders()
        finally:
            if forget_cancel is not None:
                forget_cancel()
            with self.reap_lock:
                self.reaped = True
                if not _has_exited(self.pid):  # only on an unexpected error above
                    signal_group(self.pid, signal.SIGKILL)
                self.proc.wait()
            self._close()
        return ProcessResult(
            self.proc.returncode,
            b"".join(self.chunks["stdout"]),
            b"".join(self.chunks["stderr"]),
            timed_out=timed_out,
            cancelled=self.killed_by_cancel,
            overflow=self.overflow,
            output_cap=self.output_cap,
        )

    def _start_writing(self) -> None:
        assert self.stdin_fd is not None
        os.set_blocking(self.stdin_fd, False)
        self._write_some()
        if self.stdin_fd is not None:
            self.poller.register(self.stdin_fd, select.POLLOUT)

    def _write_some(self) -> None:
        fd = self.stdin_fd
        assert fd is not None
        try:
            while self.pending:
                written = os.write(fd, self.pending[:_READ_CHUNK])
                self.pending = self.pending[written:]
        except BlockingIOError:
            return
        except OSError:  # the child closed stdin or exited: it gets no more
            pass
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin_fd is None:
            return
        try:
            self.poller.unregister(self.stdin_fd)
        except KeyError:
            pass
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.stdin_fd = None

    def _pump(self) -> bool:
        """Move data until the child exits (True) or the deadline passes (False)."""
        while True:
            if self.overflow:
                return True
            if self.pidfd is None and _has_exited(self.pid):
                return True
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                return False
            # poll(2) takes an int of milliseconds (24.8 days at most): a longer timeout
            # just goes round this loop again.
            wait_ms = min(math.ceil(remaining * 1000), 10 if self.pidfd is None else _MAX_POLL_MS)
            for fd, _ in self.poller.poll(wait_ms):
                if fd == self.pidfd:
                    return True
                if fd == self.stdin_fd:
                    self._write_some()
                elif fd in self.readers:
                    self._read(fd)

    def _read(self, fd: int) -> bool:
        """Read what is there; False at end of stream."""
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        name = self.readers[fd]
        if not chunk:
            self.poller.unregister(fd)
            del self.readers[fd]
            return False
        self.sizes[name] += len(chunk)
        if self.sizes[name] > self.output_cap:
            self.overflow = name
            return False
        self.chunks[name].append(chunk)
        return True

    def _drain(self) -> None:
        """After the child exited: take what it left in the pipes, without waiting for more."""
        for fd in list(self.readers):
            if self.overflow:
                break
            self._read_while_ready(fd)

    def _read_while_ready(self, fd: int) -> None:
        """Read ``fd`` for as long as data is there now; never wait for more."""
        while self._read(fd):
            try:
                if not select.select([fd], [], [], 0)[0]:
                    break
            except (OSError, ValueError):  # closed meanwhile
                break

    def _kill_escaped_holders(self) -> None:
        """Our pipes are still open with the whole group killed: a process that left the group
        (setsid) kept them. Find it by the pipe it holds and kill it, so nothing a hook
        started outlives it unless it detached properly (setsid, output redirected)."""
        deadline = time.monotonic() + ESCAPE_GRACE_SECONDS
        while self.readers and time.monotonic() < deadline:
            # Killed group members take a moment to let go of the pipe.
            ready = select.select(list(self.readers), [], [], max(0.0, deadline - time.monotonic()))[0]
            for fd in ready:
                self._read_while_ready(fd)
        if not self.readers:
            return
        inodes = {os.fstat(fd).st_ino for fd in self.readers}
        for pid in pipe_holders(inodes):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_group(self, graceful: bool) -> None:
        if graceful:
            signal_group(self.pid, signal.SIGTERM)
            self._wait_exit(KILL_GRACE_SECONDS)
        signal_group(self.pid, signal.SIGKILL)

    def _wait_exit(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the child to exit, without reaping it."""
        end = time.monotonic() + seconds
        if self.pidfd is not None:
            select.select([self.pidfd], [], [], seconds)
            return
        while time.monotonic() < end and not _has_exited(self.pid):
            time.sleep(0.005)

    def _close(self) -> None:
        self._close_stdin()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def pipe_holders(inodes: set[int]) -> list[int]:
    """Pids of other processes that hold a pipe with one of these inodes (Linux /proc)."""
    targets = {f"pipe:[{inode}]" for inode in inodes}
    me = os.getpid()
    holders = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        directory = f"/proc/{pid}/fd"
        try:
            descriptors = os.listdir(directory)
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"{directory}/{descriptor}") in targets:
                    holders.append(pid)
                    break
            except OSError:
                continue
    return holders


def _open_pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _has_exited(pid: int) -> bool:
    """Whether the child exited, leaving it unreaped so its pid and group id stay reserved."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None
