"""rego-cpp through regopy's ctypes layer: interpreters, their compiled policies and their
results (``_Engine``), the interpreters of one policy (``_Engines``), and the worker threads
evaluations run on. Loaded on first use: the library is 21 MB."""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
import threading
import time
import weakref
from typing import Any, Literal

import attrs

from hookbus.cancel import CancelToken
from hookbus.errors import shorten
from hookbus.workers import ElasticThreads, clamp_wait
from hookbus_rego.limits import MAX_EVALUATIONS


def _native() -> Any:
    """regopy's ctypes layer over rego-cpp's C API (``regopy.rego_shared``), imported on
    first use: it loads a 21 MB library, which a hookbus without rego hooks never pays for.

    Not regopy's Interpreter and Output classes: Output parses a result twice (and raises
    on the results that hold an error), only takes str (the envelope would be decoded and
    encoded again), and its ``binding()`` aborts the process for an unbound name.
    """
    global _SHARED
    if _SHARED is None:
        _load_cel_first()
        import regopy.rego_shared as shared  # type: ignore[import-untyped]

        _SHARED = shared
    return _SHARED


_SHARED: Any = None


def _load_cel_first() -> None:
    """Load cel-expr-python's library before rego-cpp's, when it is installed (hookbus-cel).

    The two libraries define some of the same C++ symbols of the standard library's
    templates (``std::regex`` internals, among others), and the dynamic linker binds such a
    symbol, process-wide, to whichever library was loaded first. With rego-cpp's first,
    cel-expr-python frees memory it did not allocate on its error path and the process
    aborts ("free(): invalid size"); with cel-expr-python's first, both work. The hook that
    loads first decides the order, so rego makes sure of it here. Loading it costs about
    40 ms, once, in a process that has both plugins installed and a Rego hook.
    """
    import importlib.util

    if importlib.util.find_spec("cel_expr_python") is not None:
        import cel_expr_python.cel  # type: ignore[import-untyped]  # noqa: F401


class _NativeError(Exception):
    """rego-cpp could not do what was asked (not an error of the policy)."""


@attrs.frozen
class _Result:
    """What one evaluation gave: the result as rego-cpp writes it, or its errors."""

    text: str = ""
    #: (message, code), such as ("complete rules must not produce multiple outputs",
    #: "eval_conflict_error").
    errors: tuple[tuple[str, str | None], ...] = ()


class _Engine:
    """One rego-cpp interpreter and its compiled policy. Not safe for two evaluations at
    once: each evaluation takes one of its own (``_Engines``)."""

    def __init__(self) -> None:
        shared = _native()
        handle = shared.rego_new()
        if not handle:
            raise _NativeError("rego-cpp could not make an interpreter")
        self.handle: int = handle
        #: The interpreter and its bundle, in a list the finalizer shares: it frees both,
        #: when the engine is collected and never at exit (a daemon thread may still be
        #: evaluating on it then).
        self._handles: list[int | None] = [handle, None]
        weakref.finalize(self, _free, shared, self._handles).atexit = False
        # At its default level, rego-cpp prints every compile error to the process's stdout,
        # where bridges answer their host. The level is the interpreter's own, set before
        # anything runs on it: the process-wide default (set_default_log_level) does not
        # reach interpreters used on other threads.
        shared.rego_set_log_level(handle, shared.LogLevel.NONE)

    @classmethod
    def load(cls, bundle: bytes) -> _Engine:
        """An interpreter with a policy compiled before (``save``). rego-cpp loads a bundle
        from a file only: a private temporary one, removed at once."""
        shared = _native()
        engine = cls()
        try:
            with tempfile.TemporaryDirectory(prefix="hookbus-rego-") as directory:
                path = os.path.join(directory, "policy.rbb")
                with open(path, "wb") as stream:
                    stream.write(bundle)
                engine.bundle = shared.rego_bundle_load_binary(engine.handle, path)
        except shared.RegoError as exc:
            raise _NativeError(f"rego-cpp could not load the compiled policy: {_report(str(exc))}") from None
        except OSError as exc:  # no room for the temporary file, say
            raise _NativeError(f"the compiled policy could not be loaded: {exc}") from None
        return engine

    @property
    def bundle(self) -> int | None:
        return self._handles[1]

    @bundle.setter
    def bundle(self, value: int) -> None:
        self._handles[1] = value

    def save(self) -> bytes:
        """The compiled policy, as rego-cpp saves a bundle (to a file only: a private
        temporary one, removed at once)."""
        shared = _native()
        try:
            with tempfile.TemporaryDirectory(prefix="hookbus-rego-") as directory:
                path = os.path.join(directory, "policy.rbb")
                shared.rego_bundle_save_binary(self.handle, path, self.bundle)
                with open(path, "rb") as stream:
                    return stream.read()
        except shared.RegoError as exc:
            raise _NativeError(f"rego-cpp could not save the compiled policy: {_report(str(exc))}") from None
        except OSError as exc:
            raise _NativeError(f"the compiled policy could not be saved: {exc}") from None

    def evaluate(self, payload: bytes) -> _Result:
        """The query's result with ``payload`` (JSON) as input. rego-cpp's calls release the
        GIL (ctypes), so other threads run meanwhile."""
        library = _native().rego
        # The bytes as they are: regopy's own function takes str, and would encode it again.
        if library.regoSetInputTerm(self.handle, payload) != 0:
            return _Result(errors=((f"the envelope is no input rego-cpp reads: {self._error()}", None),))
        output = library.regoBundleQuery(self.handle, self.bundle)
        if not output:
            return _Result(errors=((self._error() or "rego-cpp gave no result", None),))
        try:
            if not library.regoOutputOk(output):
                errors = _node_errors(library.regoOutputNode(output))
                return _Result(errors=tuple(errors) or (("unknown error", None),))
            return _Result(text=_output_text(library, output))
        finally:
            library.regoFreeOutput(output)

    def _error(self) -> str:
        shared = _native()
        try:
            return _report(str(shared.rego_get_error(self.handle)))
        except (UnicodeDecodeError, shared.RegoError):
            return ""


def _report(text: str) -> str:
    """rego-cpp's text of an error, on one line and short."""
    return shorten(" ".join(text.split()), 300)


def _free(shared: Any, handles: list[int | None]) -> None:
    handle, bundle = handles
    if bundle:
        shared.rego_free_bundle(bundle)
    if handle:
        shared.rego_free(handle)


def _output_text(library: Any, output: int) -> str:
    size = library.regoOutputJSONSize(output)
    buffer = ctypes.create_string_buffer(size)
    if library.regoOutputJSON(output, buffer, size) != 0:
        raise _NativeError("rego-cpp could not write the result")
    # A builtin can make a string of any bytes (base64.decode): no result is lost for it.
    text: str = buffer.value.decode("utf-8", errors="replace")
    return text


def _node_errors(root: int) -> list[tuple[str, str | None]]:
    """(message, code) of each error under an error node of rego-cpp (an ErrorSeq of
    Errors, each with an ErrorMessage and an ErrorCode)."""
    shared = _native()
    kinds = shared.NodeKind
    library = shared.rego
    if library.regoNodeType(root) == kinds.Error:
        errors = [root]
    else:  # the first twenty are plenty for a message
        errors = [library.regoNodeGet(root, index) for index in range(min(library.regoNodeSize(root), 20))]
    found: list[tuple[str, str | None]] = []
    for error in errors:
        if not error or library.regoNodeType(error) != kinds.Error:
            continue
        message: str | None = None
        code: str | None = None
        for index in range(library.regoNodeSize(error)):
            child = library.regoNodeGet(error, index)
            child_kind = library.regoNodeType(child)
            if child_kind == kinds.ErrorMessage:
                message = _node_value(child)
            elif child_kind == kinds.ErrorCode:
                code = _node_value(child)
        found.append((message or "unknown error", code))
    return found


def _node_value(node: int) -> str | None:
    shared = _native()
    try:
        value: str = shared.rego_node_value(node)
    except (UnicodeDecodeError, shared.RegoError):
        return None
    return value or None


_ERRORMSG = re.compile(rb"\(errormsg (\d+):")


def _embedded_errors(output: str) -> list[str]:
    """The messages of the errors rego-cpp wrote inside a result (``(errormsg 10:Not a
    term)``: the length in bytes, then the message)."""
    data = output.encode("utf-8", "replace")
    found: list[str] = []
    for match in _ERRORMSG.finditer(data):
        message = data[match.end() : match.end() + int(match.group(1))].decode("utf-8", "replace")
        if message not in found:
            found.append(message)
    return found


def _with_code(message: str, code: str | None) -> str:
    return f"{message} ({code})" if code and code not in message else message


class _Engines:
    """The interpreters of one compiled policy: one per evaluation running (up to
    MAX_EVALUATIONS), kept for the next fires. The first is the one ``parse`` compiled."""

    def __init__(self, first: _Engine) -> None:
        self._idle: list[_Engine] = [first]
        self._count = 1
        self._changed = threading.Condition(threading.Lock())

    def take(self, deadline: float, cancel: CancelToken) -> _Engine | Literal["new"] | None:
        """An idle interpreter, or ``"new"`` (make one: there may be one more), or None
        when none came free by the deadline or the fire was cancelled."""
        with self._changed:
            if self._idle:
                return self._idle.pop()
            if self._count < MAX_EVALUATIONS:
                self._count += 1
                return "new"

        def wake() -> None:
            with self._changed:
                self._changed.notify_all()

        forget = cancel.on_cancel(wake)
        try:
            with self._changed:
                while True:
                    if self._idle:
                        return self._idle.pop()
                    if self._count < MAX_EVALUATIONS:
                        self._count += 1
                        return "new"
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or cancel.cancelled:
                        return None
                    self._changed.wait(clamp_wait(remaining))
        finally:
            forget()

    @property
    def count(self) -> int:
        with self._changed:
            return self._count

    def give_back(self, engine: _Engine) -> None:
        with self._changed:
            self._idle.append(engine)
            self._changed.notify()

    def forfeit(self) -> None:
        """A ``"new"`` that could not be made."""
        with self._changed:
            self._count -= 1
            self._changed.notify()


_THREADS: ElasticThreads | None = None


_THREADS_LOCK = threading.Lock()


def _threads() -> ElasticThreads:
    """The worker threads of every rego hook of the process: one per evaluation running,
    idle ones ending after 10 s (the core's ElasticThreads)."""
    global _THREADS
    with _THREADS_LOCK:
        if _THREADS is None:
            _THREADS = ElasticThreads("hookbus-rego", idle_seconds=10.0)
        return _THREADS

