"""Errors the bus raises, and the path-qualified problems it reports instead of raising."""

from __future__ import annotations

from typing import Iterable

import attrs


class HookBusError(Exception):
    """Base class of every error hookbus raises on purpose."""


class UnknownEventError(HookBusError, ValueError):
    """``emit`` was given an event name the spec does not have."""


class HookNotFoundError(HookBusError, KeyError):
    """``trigger`` was given a hook id that is not loaded."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class HooksDisabledError(HookBusError):
    """``trigger`` while every hook is off (settings.json or VIX_DISABLE_HOOKS)."""


class PluginError(HookBusError):
    """A plugin is broken or conflicts with another; the message names the plugin(s)."""


class BusClosedError(HookBusError, RuntimeError):
    """The bus was used after ``close()``."""


class EnvelopeError(HookBusError, ValueError):
    """``emit`` was given an envelope that is not a mapping, or that cannot be JSON."""


class ReadOnlyBusError(HookBusError):
    """A ``HookBus(read_only=True)`` was asked to fire a hook, which would write records."""


class EnvelopeTooDeep(EnvelopeError):
    """The envelope is nested deeper than ``hookbus.deepjson.MAX_NESTING`` levels: hooks
    cannot be handed it. ``emit`` does not raise it: the hooks that match count as not
    run, under their ``on_error``."""


class SpecError(HookBusError, ValueError):
    """A value in a spec is invalid. ``location`` is a JSON path relative to the value checked.

    Runners raise it from ``parse`` with a location relative to their own key
    (``"$.url"``); the loader re-roots it under the key (``"$.http.url"``).
    """

    def __init__(self, message: str, location: str | None = "$") -> None:
        super().__init__(message)
        self.message = message
        #: None when the whole document is at fault (unreadable, not JSON, too big).
        self.location = location

    def __str__(self) -> str:
        return f"{self.message} @ {self.location}" if self.location else self.message


class SpecErrors(SpecError):
    """Several ``SpecError`` found at once; iterating gives each."""

    def __init__(self, errors: list[SpecError]) -> None:
        first = errors[0] if errors else SpecError("invalid")
        super().__init__(first.message, first.location)
        self.errors = errors or [first]

    def __str__(self) -> str:
        return "; ".join(str(error) for error in self.errors)


def reroot(location: str | None, prefix: str) -> str:
    """Put a location relative to a value (``$.url``) under that value's path (``$.http``)."""
    if not location:
        return prefix
    return prefix + location[1:] if location.startswith("$") else f"{prefix}.{location}"


#: How a problem says the hook's previous, valid version stays in effect (state.json's
#: load_error carries it too, which is how ``hookbus list`` knows).
KEPT_LAST_GOOD = "(its last good version stays in effect)"


@attrs.frozen
class Problem:
    """Why a file was skipped: ``hooks/x/hook.json: unknown field 'blockng' @ $``."""

    #: The file, relative to the home when it is inside it.
    path: str
    message: str
    #: JSON path of the offending field; None when the whole file is at fault.
    location: str | None = None
    #: The hook the problem belongs to, when it is known.
    hook_id: str | None = None
    #: The hook's previous, valid version stays in effect until the file is fixed.
    kept_last_good: bool = False
    #: Whose file it is: "user" (the home) or "managed" (the managed directory).
    tier: str = "user"

    def __str__(self) -> str:
        where = f" @ {self.location}" if self.location else ""
        kept = f" {KEPT_LAST_GOOD}" if self.kept_last_good else ""
        return f"{self.path}: {self.message}{where}{kept}"


def json_limit_message(exc: ValueError) -> str:
    """What a ValueError from ``json.loads`` or YAML that is not a syntax error means: text
    that is valid, but past one of Python's limits."""
    if "digits" in str(exc):  # sys.get_int_max_str_digits(), not something a user can set
        return "a number has more than 4,300 digits"
    return str(exc)


def shorten(text: str, limit: int = 80) -> str:
    """``text`` for a message: whole up to ``limit`` characters, else its start and length
    (a 5,000-character regex or duration must not drown the message that names it)."""
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'blocking'?)`` when ``name`` is close to one of ``choices``, else ""."""
    import difflib  # only a mistake needs it

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_runnable(text: str, what: str = "a command") -> None:
    """SpecError when ``text`` can never be handed to a process (argv, cwd, environment): a
    NUL character ends a C string, so the OS refuses it on every fire. Runners call this
    from ``parse`` so that such a hook is refused at load, not failed at each fire."""
    if "\x00" in text:
        raise SpecError(f"{what} cannot hold a NUL character (\\u0000): remove it")
