"""The one strict cattrs converter, shared by the core and by runners validating their options.

Strict means a value of the wrong type is an error, never coerced: ``"enabled": "false"``
is rejected instead of becoming True. Every failure comes back as a list of
``SpecError`` with a JSON path, so users read *where*, not a traceback.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import attrs

from hookbus.errors import SpecError, SpecErrors, did_you_mean
from hookbus.jsontext import JSON_TYPE_NAMES
from hookbus.jsontext import json_type_name as json_type_name  # runners import it from here

if TYPE_CHECKING:
    import cattrs

T = TypeVar("T")

def _strict(expected: type, accept: tuple[type, ...]) -> Callable[[object, object], Any]:
    def structure(value: object, _: object) -> object:
        # bool is an int subclass; JSON true must not pass for a number.
        if type(value) not in accept:
            raise TypeError(
                f"expected {JSON_TYPE_NAMES[expected]}, got {json_type_name(value)}"
            )
        return float(value) if expected is float else value  # type: ignore[arg-type]

    return structure


#: Joins the messages of one exception that are several problems (one per unknown field):
#: transform_error allows one message per exception. Never in a message itself: user text
#: (keys, values) reaches messages only through repr(), which escapes it.
_SEPARATOR = "\x00"


def _format_exception(exc: BaseException, _type: object) -> str:
    from cattrs.errors import ForbiddenExtraKeysError

    if isinstance(exc, ForbiddenExtraKeysError):
        # One problem per key with a did-you-mean, as hook.json's own unknown fields get.
        known = [field.name for field in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        # Sorted by repr: a YAML document's keys may mix strings and integers.
        return _SEPARATOR.join(
            f"unknown field {name!r}{did_you_mean(name, known) if isinstance(name, str) else ''}"
            for name in sorted(exc.extra_fields, key=repr)
        )
    if isinstance(exc, KeyError):
        return "required field missing"
    return str(exc)


@functools.cache
def get_converter() -> cattrs.Converter:
    """The converter, built on first use: a well-typed hook.json is checked without it, so
    most start-ups never import cattrs (about 10 ms)."""
    import cattrs
    from cattrs.cols import (
        homogenous_tuple_structure_factory,
        is_mapping,
        is_sequence,
        list_structure_factory,
        mapping_structure_factory,
    )
    from cattrs.gen import make_dict_structure_fn

    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict(str, (str,)))
    converter.register_structure_hook(bool, _strict(bool, (bool,)))
    converter.register_structure_hook(int, _strict(int, (int,)))
    converter.register_structure_hook(float, _strict(float, (int, float)))

    def attrs_class_hook(cls: type) -> Callable[[object, object], Any]:
        generated: Callable[[Any, Any], Any] = make_dict_structure_fn(
            cls, converter, _cattrs_forbid_extra_keys=True
        )

        def structure(value: object, target: object) -> object:
            if not isinstance(value, Mapping):
                raise TypeError(f"expected an object, got {json_type_name(value)}")
            return generated(value, target)

        return structure

    converter.register_structure_hook_factory(attrs.has, attrs_class_hook)

    # Collections are strict too: a string is not an array of characters, a list is not
    # an object.
    def checked(
        expected: tuple[type, ...], name: str, make: Callable[[Any, Any], Any]
    ) -> Callable[[Any], Callable[[object, object], Any]]:
        def factory(cls: Any) -> Callable[[object, object], Any]:
            generated = make(cls, converter)

            def structure(value: object, target: object) -> object:
                if not isinstance(value, expected):
                    raise TypeError(f"expected {name}, got {json_type_name(value)}")
                return generated(value, target)

            return structure

        return factory

    def is_tuple(cls: Any) -> bool:
        return is_sequence(cls) and typing.get_origin(cls) is tuple

    converter.register_structure_hook_factory(
        is_tuple, checked((list, tuple), "an array", homogenous_tuple_structure_factory)
    )
    converter.register_structure_hook_factory(
        lambda cls: is_sequence(cls) and not is_tuple(cls),
        checked((list, tuple), "an array", list_structure_factory),
    )
    converter.register_structure_hook_factory(
        is_mapping, checked((Mapping,), "an object", mapping_structure_factory)
    )
    return converter




def structure(value: object, cls: type[T], location: str = "$") -> T:
    """Structure ``value`` into ``cls`` or raise ``SpecErrors`` listing every problem."""
    converter = get_converter()
    import cattrs  # loaded by get_converter already

    try:
        return converter.structure(value, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        messages = cattrs.transform_error(exc, path=location, format_exception=_format_exception)
        raise SpecErrors([error for message in messages for error in _split(message)]) from None


def _split(message: str) -> list[SpecError]:
    text, _, where = message.rpartition(" @ ")
    if not text:
        return [SpecError(message)]
    return [SpecError(part, where) for part in text.split(_SEPARATOR)]
