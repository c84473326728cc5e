"""An older version's decoded request as the newer kio class a handler is written against (Kafka's model).

kio has one dataclass per API version, holding only the fields that version has; Kafka's generated message
classes are one class for all versions, where a field a version lacks holds its schema default. A handler declares
the kio class of the newest version it serves (registry.api(..., request=...)); `upgrader(old, new)` makes the
function that turns a decoded `old` request into a `new` one, nested entities included, so the handler reads every
field without asking which version it has (it still reads ctx.api_version where the version changes a meaning,
e.g. Metadata v0's empty topic list).

A field the old version lacks gets what Kafka's generated class holds for it: the schema's explicit default (kio
carries it as the dataclass field's default), else the type's zero (false, 0, "", an empty array, a null uuid: the
same zero codec.build gives a response field). A field the old version has and the new one lacks (Kafka removed it,
e.g. OffsetFetch's top-level group_id at v8) cannot be carried: upgrader refuses with UpgradeError, and the handler
then declares the last class of each shape (registry.api's `request` tuple). Nothing here runs for a request already
of the target class, nor for the hand-decoded hot APIs (Produce, Fetch, OffsetCommit, Heartbeat).

Responses go the other way: a handler builds the newest version's response class and `to_version` writes it in the
request's version at encode time (the comment above to_version says how).
"""

from __future__ import annotations

import datetime
import operator
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from types import UnionType

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

from kbus.protocol.errors import ProtocolError

Upgrade = Callable[[object], object]


def zero_value(kt: str | None) -> object:
    """Kafka's zero for a field of kio's `kafka_type` (None: an array): what a generated Kafka message holds for
    a field with no schema default (the response fields codec.build leaves out, the request fields upgrader adds,
    the removed response fields to_version fills in)."""
    if kt is None:
        return ()
    if kt == "error_code":
        return ErrorCode.none
    if kt in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kt == "string":
        return ""
    if kt in ("bytes", "records"):
        return b""
    if kt == "bool":
        return False
    if kt == "uuid":
        return None
    if kt == "float64":
        return 0.0
    if kt == "datetime_i64":
        return None
    return 0


class UpgradeError(Exception):
    """An old version's request cannot become the target class without losing or inventing a field."""


def _nested_class(annotation: object) -> tuple[type | None, bool]:
    """(the kio entity class a field holds, if any; whether the field is an array, of entities or of scalars)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple:
        element = args[0] if args else None
        return (element if isinstance(element, type) and is_dataclass(element) else None), True
    if origin in (UnionType, typing.Union):  # `X | None`: a nullable array, entity or scalar
        for arg in args:
            if arg is not type(None):
                return _nested_class(arg)
        return None, False
    if isinstance(annotation, type) and is_dataclass(annotation):
        return annotation, False
    return None, False


@cache
def _shape(cls: type) -> dict[str, tuple[str | None, type | None, bool]]:
    """Per field: (kio's kafka_type, nested entity class, is an array of it)."""
    hints = typing.get_type_hints(cls)
    return {f.name: (f.metadata.get("kafka_type"), *_nested_class(hints[f.name])) for f in fields(cls)}


def version_of(cls: type) -> int:
    """A kio message class's API version (its generated `__version__` marker)."""
    return int(cls.__version__)  # type: ignore[attr-defined]  # kio generates it on every message class


def _has_default(cls: type, name: str) -> bool:
    f = next(f for f in fields(cls) if f.name == name)
    return f.default is not MISSING or f.default_factory is not MISSING


def _each(convert: Upgrade) -> Upgrade:
    def each(values: object) -> object:
        return None if values is None else tuple([convert(v) for v in typing.cast(tuple[object, ...], values)])

    return each


def _one(convert: Upgrade) -> Upgrade:
    def one(value: object) -> object:
        return None if value is None else convert(value)

    return one


@cache
def upgrader(source: type, target: type, path: str = "") -> Upgrade:
    """The function from a `source` instance to a `target` instance (see the module's docstring). Cached: made
    once per (class, class) pair. UpgradeError names the first field that cannot be carried."""
    where = path or target.__name__
    old, new = _shape(source), _shape(target)
    lost = [name for name in old if name not in new]
    if lost:
        raise UpgradeError(f"{where}: {source.__name__} v{version_of(source)} has {', '.join(lost)}, which "
                           f"v{version_of(target)} lacks (Kafka removed it): declare the last class with it")
    return _field_by_field(source, target, where, upgrader, f"added after v{version_of(source)}")


def _field_by_field(source: type, target: type, where: str, inner: Callable[[type, type, str], Upgrade],
                    absent: str) -> Upgrade:  # fmt: skip
    """The conversion of a `source` instance to `target`, one rule for both directions (a request upgraded to the
    handler's class, a response written in an older version): each field of `target` is copied from `source`,
    converted by `inner(source's entity, target's entity, path)` when it holds nested entities, or, when `source`
    lacks it, left to kio's (Kafka's schema) default, else the type's zero. `absent` says in an error how a
    missing nested entity came to be missing ("added after v3")."""
    have = _shape(source)
    copied: list[str] = []
    converted: list[tuple[str, Upgrade]] = []
    zeros: dict[str, object] = {}
    for name, (kafka_type, nested, is_array) in _shape(target).items():
        if name not in have:
            if _has_default(target, name):
                continue  # the dataclass fills in kio's (Kafka's schema) default
            if nested is not None and not is_array:
                raise UpgradeError(f"{where}.{name}: an entity {absent} with no default")
            zeros[name] = () if is_array else zero_value(kafka_type)
            continue
        have_type, have_nested, have_is_array = have[name]
        if have_type != kafka_type or (have_nested is None) != (nested is None) or have_is_array != is_array:
            older, newer = sorted((version_of(source), version_of(target)))
            raise UpgradeError(f"{where}.{name}: its type changed between v{older} and v{newer}")
        if nested is None or have_nested is None:
            copied.append(name)
        else:
            convert = inner(have_nested, nested, f"{where}.{name}")
            converted.append((name, _each(convert) if is_array else _one(convert)))
    return _make(target, tuple(copied), tuple(converted), zeros)


def _make(target: type, copied: tuple[str, ...], converted: tuple[tuple[str, Upgrade], ...],
          zeros: dict[str, object]) -> Upgrade:  # fmt: skip
    """The upgrade as one generated function, `T(a=r.a, b=up_b(r.b), c=zero_c)`, as dataclasses makes its
    __init__: a closure looping over the field names cost 2.5x as much (9 against 3.7 µs for a JoinGroup v0)."""
    for name in (*copied, *(n for n, _ in converted), *zeros):
        if not name.isidentifier():  # kio's field names always are; nothing else is ever pasted into the source
            raise UpgradeError(f"{target.__name__}: field name {name!r}")
    namespace: dict[str, object] = {"Target": target}
    args = [f"{name}=request.{name}" for name in copied]  # `request`: the value converted (a response for to_version)
    for name, convert in converted:
        namespace[f"up_{name}"] = convert
        args.append(f"{name}=up_{name}(request.{name})")
    for name, value in zeros.items():
        namespace[f"zero_{name}"] = value
        args.append(f"{name}=zero_{name}")
    exec(f"def upgrade(request):\n    return Target({', '.join(args)})\n", namespace)
    return typing.cast(Upgrade, namespace["upgrade"])


def upgrades_for(versions: dict[int, type], targets: tuple[type, ...]) -> dict[type, Upgrade]:
    """Per decoded class of the versions an API serves, its upgrade to the first of `targets` (sorted by version)
    at or after its version; the targets themselves are left out (they reach the handler as decoded)."""
    ordered = sorted(targets, key=version_of)
    out: dict[type, Upgrade] = {}
    for version, source in versions.items():
        target = next((t for t in ordered if version_of(t) >= version), None)
        if target is None:
            raise UpgradeError(f"{source.__name__} v{version} is newer than every declared request class")
        if source is not target:
            out[source] = upgrader(source, target)
    return out


# ---- responses: the handler's newest version, written in the request's ----
#
# The response side of the same model, and its one place (codec.encode_response calls it). A handler builds kio's
# response class of the newest version it serves (its signature says which: `-> DescribeAclsResponse`), so mypy
# checks every field name and type it sets, nested entities included, and the handler never asks which version
# it answers (it reads ctx.api_version only where Kafka's handler does, e.g. to report an error an old version has
# no field for). At encode time to_version(newest, requested) turns it into the request's version:
# - a field the requested version lacks is dropped, as Kafka's generated writer drops an ignorable one, except an
#   error code that is not NONE: Kafka's writer refuses a non-default value of a non-ignorable field the version
#   cannot carry ("Attempted to write a non-default errorCode at version N", UnsupportedVersionException, and its
#   network thread closes the connection). kio does not carry `ignorable`: the error codes Kafka's schemas mark so
#   are listed in IGNORABLE_ERRORS; the other fields (messages, authorized operations, arrays added later) are
#   dropped as codec.build always did. ResponseVersionError is a ProtocolError: the connection is closed, as
#   Kafka's, rather than an error lost. A handler answering an old version reports such an error where that
#   version can (ElectLeaders v0: in each partition's result, as Kafka's ElectLeadersResponse constructor does).
# - a field the requested version has and the newest lacks (Kafka removed it) gets what Kafka's one class holds for
#   a field its handler did not set: the schema default, else the type's zero. A handler that must set such a field
#   for an old version returns that version's class itself, which is written as it is.
# Nothing here runs for a response already of the requested version, nor for the hot APIs' hand-encoded bodies
# (Produce, Fetch, Metadata, OffsetCommit, Heartbeat return an EncodedBody in their hot paths).


# (response class name, field) of the error codes added in a later version that Kafka's schemas mark "ignorable"
# (AddPartitionsToTxnResponse.json: the top-level ErrorCode of v4+); every other one is refused (see above)
IGNORABLE_ERRORS: frozenset[tuple[str, str]] = frozenset({("AddPartitionsToTxnResponse", "error_code")})


class ResponseVersionError(ProtocolError):
    """A response holds an error its request's version has no field for (Kafka's UnsupportedVersionException on
    writing a non-default, non-ignorable field)."""


Downgrade = Callable[[Entity], Entity]


@cache
def to_version(source: type[Entity], target: type[Entity]) -> Downgrade:
    """The function from a `source` response (kio's class of one API version) to `target`'s version of it (see
    above). Cached: made once per (class, class) pair; UpgradeError when the shapes cannot be matched."""
    if source.__api_key__ != target.__api_key__:  # type: ignore[attr-defined]  # kio generates it on messages
        raise UpgradeError(f"{source.__name__} is not a response of {target.__name__}'s API")
    return typing.cast(Downgrade, _to_version(source, target, ""))


@cache
def _to_version(source: type, target: type, path: str) -> Upgrade:
    where = path or f"{target.__name__} v{version_of(target)}"
    new, old = _shape(source), _shape(target)
    # a field the target's version has and the source's lacks was removed after the target's version
    convert = _field_by_field(source, target, where, _to_version, f"removed after v{version_of(target)}")
    errors = tuple(name for name, (kafka_type, _, _) in new.items() if name not in old
                   and kafka_type == "error_code" and (source.__name__, name) not in IGNORABLE_ERRORS)
    if not errors:
        return convert
    return _refusing_errors(convert, errors, where)


def _refusing_errors(convert: Upgrade, names: tuple[str, ...], where: str) -> Upgrade:
    read = [(name, operator.attrgetter(name)) for name in names]

    def checked(value: object) -> object:
        for name, field_of in read:
            if field_of(value) != ErrorCode.none:
                raise ResponseVersionError(f"{where}: attempted to write a non-default {name} "
                                           f"({ErrorCode(field_of(value)).name}), which that version lacks")
        return convert(value)

    return checked
