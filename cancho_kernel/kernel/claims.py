"""Timing statements on a bench: ``--claim "A / B < K"`` (checked: fails the cell) and
``--figure "A / B ~ R"`` (the design document's own number, shown beside this run's; never fails).

Both compare two of the bench's programs by the median of their paired per-round ratios of CPU
time, user + sys (run i of A divided by run i of B). CPU time is the program's own work: on a
loaded machine wall time also counts the time other processes held the cores, and short runs'
wall ratios then swing by several times, while their CPU ratios hold.

A **claim** is for what the document asserts as a property of any machine (a direction, "about
level" with a generous margin): it *held* or *failed*, and a failed claim fails the cell after the
plot and table are shown. A **figure** is for a number that depends on the CPU and the compilers
(docs/claims.md says which are which and why): the measured ratio beside the document's ``R``;
it *holds* when the measured ratio is within a factor of :data:`HOLD_FACTOR` (1.5) of ``R``, that is
``R / 1.5 <= measured <= R * 1.5``, and otherwise *differs*, by ``×K`` with ``K = measured / R``.

What either prints as ``text/plain`` never holds a timing (``claim putchar / C:putchar < 2: holds``,
``figure scan_checked / scan_wrapping (document 1.30): shown in the table``), so strict nbval
compares it on any machine (a figure's line does not even say holds or differs); the numbers go
into the table's HTML and into the display's metadata, ``metadata["cancho"]["statements"]``, one
record per statement (:meth:`Statement.record`).

Programs are named as in the bench: by the name given to ``%bench`` (``C:putchar``), by their
label (``C putchar``), or ``cell`` for ``%%bench``'s own program.
"""

from __future__ import annotations

import html
import math
import operator
import re
import statistics
from dataclasses import dataclass
from enum import Enum

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_CLAIM = re.compile(rf"^\s*(?P<a>.+?)\s*/\s*(?P<b>.+?)\s*(?P<op><=|>=|<|>)\s*(?P<k>{_NUMBER})\s*$")
_FIGURE = re.compile(rf"^\s*(?P<a>.+?)\s*/\s*(?P<b>.+?)\s*~\s*(?P<k>{_NUMBER})\s*$")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

HOLD_FACTOR = 1.5
"""A figure holds when the measured ratio is within this factor of the document's, either way."""


class ClaimError(ValueError):
    """A statement that cannot be read or names a program the bench does not have."""


class Kind(str, Enum):
    CLAIM = "claim"
    FIGURE = "figure"


class Outcome(str, Enum):
    """A claim held or failed; a figure holds or differs (never a failure)."""

    HELD = "held"
    FAILED = "failed"
    HOLDS = "holds"
    DIFFERS = "differs"


@dataclass(frozen=True)
class Claim:
    """``a / b op bound``, as written: checked, fails the cell when it does not hold."""

    a: str
    b: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.a} / {self.b} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Figure:
    """``a / b ~ document``: the document's ratio, shown beside the measured one."""

    a: str
    b: str
    document: float
    written: str  # the document's number as written (``1.30``), so the line reads as the cell does

    @property
    def text(self) -> str:
        return f"{self.a} / {self.b} ~ {self.written}"


@dataclass(frozen=True)
class Statement:
    """One claim or figure, judged against a bench's measurements."""

    kind: Kind
    text: str
    value: float         # median of paired per-round ratios a/b of CPU time
    document: float | None
    outcome: Outcome
    factor: float | None  # measured / document (figures only)

    @property
    def failed(self) -> bool:
        return self.outcome is Outcome.FAILED

    def record(self) -> dict:
        """The metadata record (the contract scripts/build_library.py reads)."""
        return {"kind": self.kind.value, "text": self.text, "value": _finite(self.value),
                "document": self.document, "verdict": self.outcome.value, "factor": _finite(self.factor)}


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def parse_claim(text: str) -> Claim:
    m = _CLAIM.match(text)
    if m is None:
        raise ClaimError(f"--claim `{text}`: write A / B < K (also <=, >, >=), e.g. \"putchar / C:putchar < 2\"")
    bound = float(m["k"])
    if not bound > 0:
        raise ClaimError(f"--claim `{text}`: the bound must be positive")
    return Claim(m["a"], m["b"], m["op"], bound)


def parse_figure(text: str) -> Figure:
    m = _FIGURE.match(text)
    if m is None:
        raise ClaimError(f"--figure `{text}`: write A / B ~ R with R the document's ratio, "
                         "e.g. \"scan_checked / scan_wrapping ~ 0.91\"")
    document = float(m["k"])
    if not document > 0:
        raise ClaimError(f"--figure `{text}`: the document's ratio must be positive")
    return Figure(m["a"], m["b"], document, m["k"])


def _find(items: list[dict], name: str) -> dict:
    for it in items:
        if name in (it["label"], it["ref"]) or (it["ref"] or "").split(":")[-1] == name and it["kind"] != "c":
            return it
    known = ", ".join(it["label"] for it in items)
    raise ClaimError(f"no program `{name}` in this bench (it has: {known})")


def check_names(statements: list[Claim | Figure], labels_and_refs: list[tuple[str, str | None]]) -> None:
    """Refuse a statement naming a program the bench will not run, before anything is measured."""
    items = [{"label": label, "ref": ref, "kind": "c" if (ref or "").startswith("C:") else "cancho"}
             for label, ref in labels_and_refs]
    for s in statements:
        flag = "--claim" if isinstance(s, Claim) else "--figure"
        try:
            _find(items, s.a)
            _find(items, s.b)
        except ClaimError as e:
            raise ClaimError(f"{flag} `{s.text}`: {e}") from None


def _cpu(item: dict) -> list[float]:
    """The item's CPU time per run (user + sys, ms)."""
    return [u + s for u, s in zip(item["samples"]["user_ms"], item["samples"]["sys_ms"])]


def paired_ratio(doc: dict, a: str, b: str) -> float:
    """The median of the per-round ratios of CPU time, ``a`` over ``b``."""
    x, y = _find(doc["items"], a), _find(doc["items"], b)
    pairs = [p / q for p, q in zip(_cpu(x), _cpu(y)) if q > 0]
    return statistics.median(pairs) if pairs else float("inf")


def judge_one(s: Claim | Figure, doc: dict) -> Statement:
    """One statement against a bench document (``bench.document``)."""
    ratio = paired_ratio(doc, s.a, s.b)
    if isinstance(s, Claim):
        held = _OPS[s.op](ratio, s.bound)
        return Statement(Kind.CLAIM, s.text, ratio, None, Outcome.HELD if held else Outcome.FAILED, None)
    factor = ratio / s.document
    holds = 1 / HOLD_FACTOR <= factor <= HOLD_FACTOR
    return Statement(Kind.FIGURE, s.text, ratio, s.document, Outcome.HOLDS if holds else Outcome.DIFFERS, factor)


def judge(statements: list[Claim | Figure], doc: dict) -> list[Statement]:
    """Each statement against a bench document, in the order written."""
    return [judge_one(s, doc) for s in statements]


def plain_line(s: dict) -> str:
    """What ``text/plain`` says of one statement record: never a figure measured here."""
    a_b = s["text"].split(" ~ ")[0]
    if s["kind"] == Kind.FIGURE.value:
        return f"figure {a_b} (document {s['text'].split(' ~ ')[1]}): shown in the table"
    return f"claim {s['text']}: {'holds' if s['verdict'] == Outcome.HELD.value else 'DOES NOT HOLD'}"


def html_note(s: dict) -> str:
    """The table's note for one statement record: the measured ratio, the verdict, for a figure
    the document's number and the factor between them."""
    value = "∞" if s["value"] is None else f"{s['value']:.2f}"
    if s["kind"] == Kind.CLAIM.value:
        verdict = "holds" if s["verdict"] == Outcome.HELD.value else "<b>does not hold</b>"
        return (f"claim <code>{html.escape(s['text'])}</code> {verdict}: paired median of CPU "
                f"time (user + sys) {value}")
    a_b = html.escape(s["text"].split(" ~ ")[0])
    if s["verdict"] == Outcome.HOLDS.value:
        verdict = f"holds (within {HOLD_FACTOR:g}× of the document's)"
    else:
        factor = "∞" if s["factor"] is None else f"{s['factor']:.2f}"
        verdict = f"<b>differs, by ×{factor}</b>"
    return (f"figure <code>{a_b}</code>: {value} here (paired median of CPU time, user + sys) against "
            f"the document's {s['document']:g}: {verdict}")


def failure_message(statements: list[Statement]) -> str | None:
    """The cell's error text when a claim failed (figures never fail); None when none did."""
    failed = [s for s in statements if s.failed]
    if not failed:
        return None
    return "; ".join(f"{s.text} does not hold: the paired median of CPU time is {s.value:.2f}" for s in failed)
