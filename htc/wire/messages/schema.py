"""How a wire message is declared and checked: the field types and the two base classes.

A message is a frozen :class:`msgspec.Struct` deriving from :class:`Message`; a record nested
in messages derives from :class:`Record`. Field types and simple constraints are msgspec
annotations (the types below), so a decoder enforces them for free, and building a message in
Python runs the same conversion once (:func:`validate`, from ``__post_init__``). Rules that
span fields live in each class's ``_check`` method (helpers: :func:`invalid`, :func:`one_of`,
:func:`ad_text_ok`), which also runs after decoding. :data:`MODE` tells ``__post_init__`` how
it was reached; :func:`htc.wire.messages.decode` sets it.

The conversion copies the whole message (file bytes included), and a daemon's hot path builds
its messages from values its own code typed (ints formatted as job ids, bytes read from
files): inside :func:`built_here` such a message is not converted, only its ``_check`` runs.
What keeps a peer safe is unchanged, since every receiver decodes -- and so validates -- each
frame (:func:`htc.wire.messages.decode`); a value built wrongly there is refused by the receiver
instead of the sender.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from htc.wire.errors import MessageInvalid

NonEmpty = Annotated[str, Meta(min_length=1)]
#: a ClassAd attribute name as HTCondor spells them (data keeps its CamelCase)
AttrName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
#: ``cluster`` or ``cluster.proc``, each at most 10 digits: a number any receiver converts
#: with ``int()`` and stores in a 64-bit column (a 5,000-digit id is refused at decode)
JobId = Annotated[str, Meta(pattern=r"^[0-9]{1,10}(\.[0-9]{1,10})?$")]
#: a daemon as DAEMON_LIST names it (COLLECTOR, SCHEDD, ...), case-insensitive
DaemonName = Annotated[str, Meta(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]
#: the largest integer a field takes: a ClassAd's and sqlite's 64-bit integers (MessagePack
#: would carry unsigned 64-bit numbers up to 2**64 - 1, which neither can hold)
INT64_MAX = 2**63 - 1
Int = Annotated[int, Meta(ge=-INT64_MAX - 1, le=INT64_MAX)]
Count = Annotated[int, Meta(ge=0, le=INT64_MAX)]
Positive = Annotated[int, Meta(gt=0, le=INT64_MAX)]
#: a duration or a time stamp: finite (no NaN, no infinity: deadlines are computed from it)
Seconds = Annotated[float, Meta(ge=0, le=1e12)]
#: new-syntax ClassAd text, ``[ A = 1; B = "x" ]``
AdText = Annotated[str, Meta(min_length=2)]

#: how the running __post_init__ was reached: None (built in Python), "decode", "nested"
#: (inside validate's own conversion, whose result is only used for its field values), or
#: "trusted" (built in Python inside :func:`built_here`)
MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar("htc_wire_mode", default=None)


def validate(obj: msgspec.Struct) -> None:
    """Run msgspec's decode-time checks on an object built in Python, then adopt the
    converted values (``"Machine"`` becomes ``AdType.Startd``, lists become tuples)."""
    token = MODE.set("nested")
    try:
        checked = msgspec.convert(msgspec.to_builtins(obj), type(obj))
    except msgspec.ValidationError as exc:
        raise MessageInvalid(f"{type(obj).__name__}: {exc}") from None
    finally:
        MODE.reset(token)
    for field in obj.__struct_fields__:
        msgspec.structs.force_setattr(obj, field, getattr(checked, field))


@contextlib.contextmanager
def built_here() -> Iterator[None]:
    """Messages and records built in this block skip :func:`validate`'s conversion (their
    ``_check`` still runs): for code that builds them from values it typed itself, on a hot
    path. Their receivers validate them as they validate every frame (on decode)."""
    token = MODE.set("trusted")
    try:
        yield
    finally:
        MODE.reset(token)


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checked, immutable record nested inside messages (not a message by itself)."""

    def __post_init__(self) -> None:
        mode = MODE.get()
        if mode == "nested":
            return
        if mode is None:
            validate(self)
        self._check()

    def _check(self) -> None:
        """Cross-field rules; raise :class:`MessageInvalid` naming the field and the fix."""


class Message(Record, frozen=True, tag=True):
    """Base of every wire message; the tag (``"type"`` on the wire) is the class name."""

    #: the reply a request expects (None: a reply, or a message sent without expecting one)
    reply_type: ClassVar[type[Message] | None] = None


def invalid(msg: Message | Record, text: str) -> MessageInvalid:
    return MessageInvalid(f"{type(msg).__name__}: {text}")


def one_of(msg: Message, **fields: object) -> None:
    given = [name for name, value in fields.items() if value]
    if len(given) != 1:
        names = " or ".join(fields)
        raise invalid(msg, f"give exactly one of {names} (got {', '.join(given) or 'none'})")


def ad_text_ok(msg: Message | Record, field: str, text: str) -> None:
    if not text.lstrip().startswith("["):
        raise invalid(msg, f"{field} must be new-syntax ClassAd text starting with '[', got {text[:40]!r}")


__all__ = ["AdText", "AttrName", "Count", "DaemonName", "INT64_MAX", "Int", "JobId", "MODE", "Message",
           "NonEmpty", "Positive", "Record", "Seconds", "ad_text_ok", "built_here", "invalid", "one_of", "validate"]
