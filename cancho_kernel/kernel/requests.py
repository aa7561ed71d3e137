"""What a request from a frontend must hold before a handler sees it, and the error reply when
it does not: every request gets a reply (issue 22, finding 10).

ipykernel's handlers read ``content`` as they find it: a missing field, a string ``cursor_pos``
or a ``history`` field it does not know raised inside the handler, and a lone surrogate
(``"\\ud800"``, legal JSON a browser can send) could not be encoded back to the frontend; either
way no reply was sent and the frontend waited forever. Here each request type's fields are
checked against the messaging protocol (the field tables below) and a bad one is described, with
where a surrogate is (line and column of the cell), so that the kernel can answer with
``status: error`` (or the protocol's empty answer) and stay idle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

_SURROGATE = re.compile("[\ud800-\udfff]")


class Kind(Enum):
    """What a field holds."""

    TEXT = "a string"
    BOOL = "true or false"
    INT = "a whole number"
    OPT_INT = "a whole number or null"
    DICT = "an object"
    LIST = "a list"


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    required: bool = False


FIELDS: dict[str, tuple[Field, ...]] = {
    "execute_request": (Field("code", Kind.TEXT, True), Field("silent", Kind.BOOL),
                        Field("store_history", Kind.BOOL), Field("user_expressions", Kind.DICT),
                        Field("allow_stdin", Kind.BOOL), Field("stop_on_error", Kind.BOOL)),
    "complete_request": (Field("code", Kind.TEXT, True), Field("cursor_pos", Kind.OPT_INT, True)),
    "inspect_request": (Field("code", Kind.TEXT, True), Field("cursor_pos", Kind.OPT_INT, True),
                        Field("detail_level", Kind.INT), Field("omit_sections", Kind.LIST)),
    "is_complete_request": (Field("code", Kind.TEXT, True),),
    "history_request": (Field("hist_access_type", Kind.TEXT, True), Field("output", Kind.BOOL),
                        Field("raw", Kind.BOOL), Field("session", Kind.OPT_INT),
                        Field("start", Kind.OPT_INT), Field("stop", Kind.OPT_INT), Field("n", Kind.OPT_INT),
                        Field("pattern", Kind.TEXT), Field("unique", Kind.BOOL)),
}
HISTORY_TYPES = ("range", "tail", "search")

# What a reply of each type holds besides its status, when the request could not be answered.
EMPTY_REPLY: dict[str, dict] = {
    "execute_request": {},
    "complete_request": {"matches": [], "cursor_start": 0, "cursor_end": 0, "metadata": {}},
    "inspect_request": {"found": False, "data": {}, "metadata": {}},
    "is_complete_request": {},
    "history_request": {"history": []},
}


def surrogate_at(text: str) -> str | None:
    """Where the first lone surrogate of ``text`` is (``line L, column C``), or None."""
    m = _SURROGATE.search(text)
    if m is None:
        return None
    i = m.start()
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    return f"line {line}, column {column} (U+{ord(m.group()):04X})"


def _fits(value: object, kind: Kind) -> bool:
    if kind is Kind.TEXT:
        return isinstance(value, str)
    if kind is Kind.BOOL:
        return isinstance(value, bool)
    if kind in (Kind.INT, Kind.OPT_INT):
        return (value is None and kind is Kind.OPT_INT) or (isinstance(value, int) and not isinstance(value, bool))
    return isinstance(value, dict if kind is Kind.DICT else list)


def _strings(value: object, where: str):
    """Every string inside ``value`` (keys too), with where it is."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, where)
            yield from _strings(v, f"{where}.{k}" if isinstance(k, str) else where)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")


def problem(msg_type: str, content: object) -> str | None:
    """What is wrong with a request's ``content``, or None when its handler can take it."""
    if not isinstance(content, dict):
        return "the request's content is not an object"
    for where, text in _strings(content, "content"):
        at = surrogate_at(text)
        if at is not None:
            what = "the cell" if where == "content.code" else f"`{where}`"
            return (f"{what} holds a lone surrogate at {at}, which is not a character: "
                    "it cannot be compiled or sent back (remove it, or write the character it "
                    "was meant to be)")
    for f in FIELDS.get(msg_type, ()):
        if f.name not in content:
            if f.required:
                return f"the request has no `{f.name}` (it must be {f.kind.value})"
            continue
        if not _fits(content[f.name], f.kind):
            return f"`{f.name}` must be {f.kind.value}, not {type(content[f.name]).__name__}"
    return _range_problem(msg_type, content)


def _range_problem(msg_type: str, content: dict) -> str | None:
    if msg_type in ("complete_request", "inspect_request"):
        pos = content["cursor_pos"]
        if pos is not None and not 0 <= pos <= len(content["code"]):
            return f"`cursor_pos` {pos} is outside the code (0 to {len(content['code'])})"
    if msg_type == "history_request" and content["hist_access_type"] not in HISTORY_TYPES:
        return f"`hist_access_type` must be one of {', '.join(HISTORY_TYPES)}"
    return None


def known_fields(msg_type: str, content: dict) -> dict:
    """``content`` without the fields its handler does not take (a handler given ``**content``
    would raise at an unknown one)."""
    names = {f.name for f in FIELDS.get(msg_type, ())}
    return {k: v for k, v in content.items() if k in names}


def error_reply(msg_type: str, message: str) -> dict:
    """The reply to a request that could not be answered: ``status: error`` with the message
    (``is_complete`` has no error status: ``unknown``)."""
    if msg_type == "is_complete_request":
        return {"status": "unknown"}
    return {"status": "error", "ename": "bad-request", "evalue": message, "traceback": [message],
            **EMPTY_REPLY.get(msg_type, {})}
