"""The server's side of the rendezvous: the private run directory, the lock that keeps one
server per home, and the listening socket (a stale one replaced, a live one never)."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import stat
import time

from hookbus.errors import HookBusError
from hookbus.serve.rendezvous import LOCK_NAME, NoServer, connect, reachable, run_dir

logger = logging.getLogger("hookbus")

#: How long the check of an existing socket waits for a server there to accept.
LIVE_CHECK_SECONDS = 1.0
#: Connections the kernel queues for accept(): a burst of 256 clients must not be refused.
BACKLOG = 1024


class ServeError(HookBusError):
    """``hookbus serve`` cannot start; the message says why and what to do."""


def ensure_run_dir(home: str) -> str:
    """``HOME/run``, made 0700 and owned by this user; ServeError if it cannot be that."""
    if not os.path.isdir(home):
        raise ServeError(f"the home {home} does not exist; create it (mkdir -p {home}/hooks) or pass --home")
    path = run_dir(home)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ServeError(f"cannot make {path}: {exc.strerror}") from None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ServeError(f"{path} is not a directory; move it away so hookbus can make its run directory there")
    if info.st_uid != os.geteuid():
        raise ServeError(f"{path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); remove it")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700, follow_symlinks=False)
    return path


def check_socket_dir(path: str) -> None:
    """The directory of a socket given with --socket must be one no other user can write
    into (or sticky, like /tmp): else they could put their own socket in its place."""
    directory = os.path.dirname(path) or "."
    try:
        info = os.stat(directory)
    except OSError as exc:
        raise ServeError(f"cannot use the socket {path}: its directory {directory}: {exc.strerror}") from None
    if info.st_uid not in (os.geteuid(), 0):
        raise ServeError(f"the socket's directory {directory} belongs to uid {info.st_uid}; use one of yours")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise ServeError(
            f"the socket's directory {directory} is writable by others (mode "
            f"{stat.S_IMODE(info.st_mode):o}), who could replace the socket; run "
            f"chmod go-w {directory}, or choose another directory"
        )


class ServeLock:
    """An exclusive flock on ``HOME/run/serve.lock``, held for the server's life. The file
    says who holds it; the kernel releases the lock when its holder dies, however it dies."""

    def __init__(self, home: str) -> None:
        self.path = os.path.join(run_dir(home), LOCK_NAME)
        self._descriptor: int | None = None

    def acquire(self, socket_path: str) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            descriptor = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise ServeError(f"cannot open the lock {self.path}: {exc.strerror}; remove it if it is not a file") from None
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise ServeError(f"the lock {self.path} is not a regular file; remove it")
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise ServeError(f"cannot lock {self.path}: {exc.strerror}") from None
                raise ServeError(f"this home is already served: {self._holder(descriptor)}") from None
            holder = {"pid": os.getpid(), "socket": socket_path, "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, json.dumps(holder).encode() + b"\n", 0)
        except BaseException:
            os.close(descriptor)
            raise
        self._descriptor = descriptor

    def _holder(self, descriptor: int) -> str:
        try:
            holder = json.loads(os.pread(descriptor, 4096, 0))
            return f"pid {int(holder['pid'])} holds {self.path} (socket {holder['socket']}, since {holder['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return f"another process holds {self.path}"

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing releases the flock
            self._descriptor = None


def listen(path: str) -> tuple[socket.socket, tuple[int, int]]:
    """A socket listening on ``path``, mode 0600, and its file's (device, inode).

    A socket file already there is replaced when no one listens on it (a crash left it),
    never when someone does. Anything else there (a file, a link, a FIFO) is left alone."""
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise ServeError(f"cannot use the socket {path}: {exc.strerror}") from None
    if existing is not None:
        if not stat.S_ISSOCK(existing.st_mode):
            raise ServeError(f"{path} exists and is not a socket; not replacing it (move it away, or pass --socket)")
        try:
            connect(path, LIVE_CHECK_SECONDS).close()
        except NoServer:
            logger.warning("replacing the stale socket %s (no one listens on it)", path)
            os.unlink(path)
        except OSError:
            raise ServeError(f"a server already answers on {path}; not taking its socket") from None
        else:
            raise ServeError(f"a server already answers on {path}; not taking its socket")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        with reachable(path) as address:
            sock.bind(address)
            # Before listen(): until then a connect is refused, so there is no moment when
            # the socket is open to anyone the mode would keep out.
            os.chmod(address, 0o600)
            info = os.lstat(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {path}: {exc.strerror}") from None
    return sock, (info.st_dev, info.st_ino)


def remove_socket(path: str, identity: tuple[int, int]) -> None:
    """Unlink ``path`` if it is still the socket this server made."""
    try:
        with reachable(path) as address:
            info = os.lstat(address)
            if (info.st_dev, info.st_ino) == identity:
                os.unlink(address)
    except OSError:
        pass
