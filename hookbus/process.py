"""Running a hook's process: own process group, capped output, a deadline that holds.

A utility for runners (the command runner and workflow bash steps use it); the core
itself never calls it. The guarantees:

- the child runs in its own process group, so a timeout kills everything it started
  (SIGTERM, a short grace, then SIGKILL) and the child is always reaped;
- stdout and stderr are read with a cap, concurrently with writing stdin;
- the run ends when the child exits: whatever is left in its process group is killed then.
  A process that still holds the pipes (one that left the group with setsid, say) holds
  the run for at most ESCAPE_GRACE_SECONDS more: then our ends of the pipes are closed (its
  next write there gets EPIPE or SIGPIPE) and the run returns;
- only what is provably the hook's own is ever signalled: the child's process group, and
  the child itself, and only while the child is our child and not yet reaped (checked under
  the lock that reaping takes). The group's id is the child's pid, and neither can name any
  other process until the child is reaped. A process that left the group is not provably
  the hook's, so it is left alone: nothing is ever looked up by the pipe it holds, since
  between fork and exec a process forked by another thread (a sibling hook's, the
  embedder's own) holds a copy of every descriptor we have, our pipes included;
- a deadline is any float: centuries away, or infinity for none (NaN counts as passed);
- every wait is poll(2), so descriptors numbered past select's 1024 work;
- everything is polled on the calling thread: no helper threads;
- a process that cannot start says why, where a person can act on it: the working
  directory (missing, or one this user cannot enter), what ran out (processes, descriptors,
  memory), which string exec found too big (E2BIG); and it leaves no descriptor behind.

The proof that a group is still the hook's rests on the child staying unreaped until this
module reaps it: an embedder must not reap children it did not start (``waitpid(-1)``,
SIGCHLD set to SIG_IGN).
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
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import attrs

from hookbus.runners import CancelToken

if TYPE_CHECKING:
    from hookbus.decision import Failure

#: Per stream; past it the process group is killed and the run fails.
MAX_OUTPUT_BYTES = 1024 * 1024
#: poll(2) takes an int of milliseconds: 24.8 days at most.
_MAX_POLL_MS = 2**31 - 1

#: Between SIGTERM and SIGKILL on a timeout.
KILL_GRACE_SECONDS = 0.25
#: How long, after the hook's group was killed, its dying members get to let go of the pipes
#: (what they write meanwhile is kept) before the run stops reading and closes its ends.
ESCAPE_GRACE_SECONDS = 0.1
_READ_CHUNK = 65536

_GROUP_OPTION: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)
def _find_bash() -> str:
    """The first bash on PATH that no other user could have put there or changed: a PATH
    holding a directory others can write (or ".") must not choose what every hook runs."""
    from hookbus.permissions import loose_refusal, owner_refusal
    from hookbus.trust import path_refusal

    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(directory):
            continue  # "" and "." mean the current directory, whoever's it is
        candidate = os.path.join(directory, "bash")
        if not os.access(candidate, os.X_OK) or os.path.isdir(candidate):
            continue
        try:
            real = os.path.realpath(candidate)
            info = os.stat(real)
        except OSError:
            continue
        if owner_refusal(info) or loose_refusal(info) or path_refusal(Path(real).parent):
            continue
        if path_refusal(Path(directory)) is None:
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

    def failure_kind(self) -> Failure:
        """How a process that gave no exit status failed (``failure`` says it in words), for
        a hook that fails closed: "crash" (it could not start), "timeout", or "killed"
        (cancelled, or over its output cap)."""
        if self.spawn_error:
            return "crash"
        if self.timed_out and not self.cancelled:
            return "timeout"
        return "killed"


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
        pipes = _make_pipes()
    except OSError as exc:
        return ProcessResult(None, spawn_error=_describe_spawn_error(exc, argv, cwd, env))
    (stdin_read, stdin_write), (stdout_read, stdout_write), (stderr_read, stderr_write) = pipes
    ours = (stdin_write, stdout_read, stderr_read)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=stderr_write,
            cwd=cwd,
            env=env,
            close_fds=True,
            **_GROUP_OPTION,
        )
    except BaseException as exc:
        _close_all(ours)
        if isinstance(exc, OSError):
            return ProcessResult(None, spawn_error=_describe_spawn_error(exc, argv, cwd, env))
        raise
    finally:
        _close_all((stdin_read, stdout_write, stderr_write))  # the child's ends: it has them now
    return _Supervision(proc, ours, input, deadline, cancel, output_cap).run()


def _make_pipes() -> tuple[tuple[int, int], ...]:
    """The child's stdin, stdout and stderr pipes, as (read end, write end). Made here, not
    by Popen: a Popen whose second pipe failed (EMFILE) left the first one open on Pythons
    before 3.11.4: two or four descriptors lost for good at a spawn that failed so. Each end
    is close-on-exec (PEP 446): no other child inherits it."""
    made: list[tuple[int, int]] = []
    try:
        for _ in range(3):
            made.append(os.pipe())
    except BaseException:
        _close_all([fd for pair in made for fd in pair])
        raise
    return tuple(made)


def _close_all(descriptors: Sequence[int]) -> None:
    for fd in descriptors:
        try:
            os.close(fd)
        except OSError:
            pass


#: What a spawn that failed with one of these ran out of: the system's resources, not the
#: hook's fault, and a person needs to know which (the OS's words, "Resource temporarily
#: unavailable", do not say).
_RAN_OUT: dict[int, str] = {
    errno.EAGAIN: "out of processes (EAGAIN): the user's process limit (ulimit -u) or the system's was reached",
    errno.EMFILE: "out of file descriptors (EMFILE): this process has as many open as its limit (ulimit -n) allows",
    errno.ENFILE: "out of file descriptors (ENFILE): the system's table of open files is full",
    errno.ENOMEM: "out of memory (ENOMEM)",
}


def _describe_spawn_error(exc: OSError, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> str:
    """Why a process could not start, saying where and what to fix."""
    # subprocess names the working directory as the file when chdir failed in the child,
    # the program otherwise: "could not start bash: Permission denied" was a cwd's fault.
    if isinstance(exc.filename, (str, bytes, os.PathLike)) and os.fsdecode(exc.filename) == os.fsdecode(cwd):
        return f"could not start: working directory {cwd} {_directory_problem(exc)}"
    if exc.errno in _RAN_OUT:
        return f"could not start: {_RAN_OUT[exc.errno]}"
    if exc.errno == errno.E2BIG:
        return f"could not start: {describe_too_big(argv, env)}"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not cwd.is_dir():
        problem = "is not a directory" if os.path.lexists(cwd) else "does not exist"
        return f"could not start: working directory {cwd} {problem}"
    return f"could not start {argv[0]}: {exc.strerror or exc}"


def _directory_problem(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "does not exist"
    if exc.errno == errno.ENOTDIR:
        return "is not a directory"
    if exc.errno == errno.EACCES:
        return f"cannot be entered: {exc.strerror}"
    return f"cannot be used: {exc.strerror or exc}"


# -- what exec has room for ---------------------------------------------------------------
#
# The kernel refuses to start a program (E2BIG) when one string of argv or of the environment
# (``NAME=value`` and its NUL) is over MAX_ARG_STRLEN, 32 pages (128 KiB with 4 KiB pages);
# or when all of them, with a pointer each, are over the limit the stack size sets: a quarter
# of RLIMIT_STACK, at most 6 MiB, at least 128 KiB (fs/exec.c: ARG_MAX, and _STK_LIM / 4 * 3).

_ARG_MAX_FLOOR = 128 * 1024
_ARG_MAX_CEILING = 6 * 1024 * 1024
_POINTER_BYTES = 8


def max_string_bytes() -> int:
    """MAX_ARG_STRLEN: the most one string of argv or the environment may take, its NUL
    included."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        page = 4096
    return 32 * max(page, 4096)


def exec_limit() -> int:
    """The most all of exec's strings and their pointers may take, under this process's
    stack limit (which a child inherits)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    limit = _ARG_MAX_CEILING if soft == resource.RLIM_INFINITY else soft // 4
    return max(_ARG_MAX_FLOOR, min(_ARG_MAX_CEILING, limit))


def exec_bytes(text: str) -> int:
    """Bytes ``text`` takes as exec gets it, without its NUL. surrogatepass: 3 bytes for a
    surrogate, never fewer than exec will get (os.fsencode makes one byte of an undecodable
    ``\\udcXX``)."""
    return len(text.encode("utf-8", "surrogatepass"))


def exec_used(env: Mapping[str, str], argv: Sequence[str]) -> int:
    """Bytes of exec's limit that ``argv`` and ``env`` take: every string with its NUL, the
    file name (exec copies it too), and a pointer each."""
    used = exec_bytes(argv[0]) + 1
    used += sum(exec_bytes(arg) + 1 for arg in argv)
    used += sum(exec_bytes(name) + exec_bytes(value) + 2 for name, value in env.items())
    return used + _POINTER_BYTES * (len(argv) + len(env))


def exec_room(env: Mapping[str, str], argv: Sequence[str]) -> int:
    """Bytes exec has left for one more environment string (its pointer counted), given
    ``env`` and ``argv``."""
    return exec_limit() - exec_used(env, argv) - _POINTER_BYTES


def describe_too_big(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """What made exec refuse ``argv`` and ``env`` with E2BIG, by name and size: the OS says
    only "Argument list too long", which names neither the variable nor the limit."""
    longest = max_string_bytes()
    sizes = {name: exec_bytes(name) + exec_bytes(value) + 1 for name, value in env.items()}
    over = [name for name, size in sizes.items() if size + 1 > longest]
    if over:
        name = max(over, key=sizes.__getitem__)
        held = exec_bytes(env[name])
        return (
            f"the environment variable {name} holds {held:,} bytes, past the kernel's limit of "
            f"{longest:,} for one variable, its name included (E2BIG)"
        )
    for index, arg in enumerate(argv):
        if exec_bytes(arg) + 1 > longest:
            return (
                f"argument {index} of {argv[0]} holds {exec_bytes(arg):,} bytes, past the "
                f"kernel's limit of {longest:,} for one argument (E2BIG)"
            )
    used, limit = exec_used(env, argv), exec_limit()
    if used > limit:
        largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:3]
        named = ", ".join(f"{name} ({sizes[name]:,} bytes)" for name in largest)
        return (
            f"the arguments and the environment take {used:,} bytes, past the kernel's limit of "
            f"{limit:,} for all of them (a quarter of the stack size limit, ulimit -s) (E2BIG); "
            f"the largest variables: {named}"
        )
    return f"the arguments and the environment are too big for exec (E2BIG: {os.strerror(errno.E2BIG)})"


def signal_group(pgid: int, signum: int) -> None:
    """Signal a whole process group; a group that is already gone is not an error.

    Only for a group led by your own child that you have not reaped yet: after the reap its
    id may be reused, and name a stranger's group."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class _Supervision:
    """One process from spawn to reap. Private: ``run_process`` is the interface."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        pipes: tuple[int, int, int],
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
        #: Our ends of the child's stdin, stdout and stderr, closed by ``_close``.
        self.stdin_fd: int | None = pipes[0]
        self.output_fds: tuple[int, ...] = pipes[1:]
        self.readers = {pipes[1]: "stdout", pipes[2]: "stderr"}
        self.chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.sizes = {"stdout": 0, "stderr": 0}
        self.overflow: str | None = None
        self.poller = select.poll()
        self.pidfd = _open_pidfd(self.pid)
        # Held to signal and to reap: a signal sent under it, with the child found unreaped,
        # cannot reach a process that merely inherited the child's pid or group id.
        self.reap_lock = threading.Lock()
        self.reaped = False
        self.killed_by_cancel = False

    def _kill_on_cancel(self) -> None:
        with self.reap_lock:
            # A child that already exited ran to its end: its result stands, and only the
            # leftovers of its group are killed (as they would be anyway).
            if self._signal_locked(signal.SIGKILL) == "running":
                self.killed_by_cancel = True

    def run(self) -> ProcessResult:
        # Registered before anything can block, so close() can always reach this group.
        forget_cancel = (
            self.cancel.on_cancel(self._kill_on_cancel) if self.cancel is not None else None
        )
        timed_out = False
        group_killed = False
        try:
            for fd in self.readers:
                os.set_blocking(fd, False)
                self.poller.register(fd, select.POLLIN)
            self._start_writing()
            if self.pidfd is not None:
                self.poller.register(self.pidfd, select.POLLIN)
            timed_out = not self._pump()
            if timed_out or self.overflow:
                self._kill(graceful=timed_out)
            else:
                self._drain()
                # Leftovers of the group die with the hook; the child, unreaped, keeps the
                # group id from being reused until this signal is sent.
                self._signal(signal.SIGKILL)
            group_killed = True
            if self.readers:
                self._let_go_of_the_pipes()
        finally:
            if forget_cancel is not None:
                forget_cancel()
            with self.reap_lock:
                if not group_killed:
                    # After an unexpected error above: stop the hook before the reap makes
                    # its ids reusable.
                    self._signal_locked(signal.SIGKILL)
                self.reaped = True
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

    def _child_state(self) -> str:
        """The child is "running", "exited" (a zombie, its pid and group id still reserved)
        or "gone" (reaped: here, or against the rules by someone else). Never reaps."""
        if self.reaped:
            return "gone"
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "gone"
        return "running" if info is None else "exited"

    def _signal(self, signum: int) -> None:
        with self.reap_lock:
            self._signal_locked(signum)

    def _signal_locked(self, signum: int) -> str:
        """Signal the hook's process group, and the child itself when it moved out of that
        group (setpgid), which killpg would miss. Only while the child is unreaped: once it
        is gone its pid and group id may name a stranger. Returns the child's state then.
        The caller holds reap_lock, so the child cannot be reaped meanwhile."""
        state = self._child_state()
        if state == "gone":
            return state
        signal_group(self.pid, signum)
        if state == "running" and (signum == signal.SIGKILL or _group_of(self.pid) != self.pid):
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass
        return state

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
        _close_all((self.stdin_fd,))
        self.stdin_fd = None

    def _pump(self) -> bool:
        """Move data until the child exits (True) or the deadline passes (False)."""
        while True:
            if self.overflow:
                return True
            if self.pidfd is None and _has_exited(self.pid):
                return True
            remaining = self.deadline - time.monotonic()
            if not remaining > 0:  # a NaN deadline has passed too
                return False
            wait_ms = _poll_ms(remaining, 10 if self.pidfd is None else _MAX_POLL_MS)
            for fd, _ in self.poller.poll(wait_ms):
                if fd == self.pidfd:
                    return True
                if fd == self.stdin_fd:
                    self._write_some()
                elif fd in self.readers:
                    self._read(fd)

    def _read(self, fd: int) -> bool:
        """Read one chunk if there is one; True if one was read (there may be more)."""
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return False
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
            self._read_until_empty(fd)

    def _read_until_empty(self, fd: int) -> None:
        """Read ``fd`` for as long as data is there now; never wait for more (it does not
        block). A writer that keeps up is cut off by the output cap."""
        while fd in self.readers and not self.overflow and self._read(fd):
            pass

    def _let_go_of_the_pipes(self) -> None:
        """Our pipes are still open with the hook's group killed. Its dying members get
        ESCAPE_GRACE_SECONDS to let go (what they write meanwhile is kept); then reading
        stops, and ``_close`` closes our ends. Whoever still holds the pipes is not provably
        the hook's (it left the group, or it is another thread's fresh fork that has not
        exec'd yet), so it is never signalled: its next write gets EPIPE or SIGPIPE."""
        deadline = time.monotonic() + ESCAPE_GRACE_SECONDS
        waiter = select.poll()
        for fd in self.readers:
            waiter.register(fd, select.POLLIN)
        while self.readers and not self.overflow:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for fd, _ in waiter.poll(_poll_ms(remaining, _MAX_POLL_MS)):
                self._read_until_empty(fd)
                if fd not in self.readers:
                    waiter.unregister(fd)

    def _kill(self, graceful: bool) -> None:
        if graceful:
            self._signal(signal.SIGTERM)
            self._wait_exit(KILL_GRACE_SECONDS)
        self._signal(signal.SIGKILL)

    def _wait_exit(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the child to exit, without reaping it."""
        if self.pidfd is not None:
            waiter = select.poll()
            waiter.register(self.pidfd, select.POLLIN)
            waiter.poll(_poll_ms(seconds, _MAX_POLL_MS))
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end and not _has_exited(self.pid):
            time.sleep(0.005)

    def _close(self) -> None:
        self._close_stdin()
        _close_all(self.output_fds)
        self.output_fds = ()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _poll_ms(seconds: float, cap: int) -> int:
    """``seconds`` as poll(2)'s int of milliseconds, rounded up, at most ``cap``: a longer
    wait (a deadline centuries away, or infinity) just goes round its loop again."""
    if seconds >= cap / 1000:
        return cap
    return max(0, math.ceil(seconds * 1000))


def _group_of(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return pid


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
