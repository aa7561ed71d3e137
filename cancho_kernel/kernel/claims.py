"""``--claim "A / B < K"`` on a bench: a design document's timing claim, checked by the cell.

A claim compares two of the bench's programs by the median of their paired per-round ratios of
CPU time, user + sys (run i of A divided by run i of B). CPU time is the program's own work: on a
loaded machine wall time also counts the time other processes held the cores, and short runs'
wall ratios then swing by several times, while their CPU ratios hold. What a claim prints never holds a timing
(``claim putchar / C:putchar < 2: holds``), so strict nbval compares it on any machine that keeps
the claim; the measured ratio goes into the table's HTML and the display's metadata. A claim
that does not hold fails the cell, after the plot and table are shown.

Programs are named as in the bench: by the name given to ``%bench`` (``C:putchar``), by their
label (``C putchar``), or ``cell`` for ``%%bench``'s own program.
"""

from __future__ import annotations

import operator
import re
import statistics
from dataclasses import dataclass

_CLAIM = re.compile(r"^\s*(?P<a>.+?)\s*/\s*(?P<b>.+?)\s*(?P<op><=|>=|<|>)\s*(?P<k>[0-9]+(?:\.[0-9]+)?)\s*$")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class ClaimError(ValueError):
    """A claim that cannot be read or names a program the bench does not have."""


@dataclass(frozen=True)
class Claim:
    """``a / b op bound``, as written."""

    a: str
    b: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.a} / {self.b} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    ratio: float      # median of paired per-round ratios a/b of CPU time
    holds: bool


def parse_claim(text: str) -> Claim:
    m = _CLAIM.match(text)
    if m is None:
        raise ClaimError(f"--claim `{text}`: write A / B < K (also <=, >, >=), e.g. \"putchar / C:putchar < 2\"")
    bound = float(m["k"])
    if not bound > 0:
        raise ClaimError(f"--claim `{text}`: the bound must be positive")
    return Claim(m["a"], m["b"], m["op"], bound)


def _find(items: list[dict], name: str) -> dict:
    for it in items:
        if name in (it["label"], it["ref"]) or (it["ref"] or "").split(":")[-1] == name and it["kind"] != "c":
            return it
    known = ", ".join(it["label"] for it in items)
    raise ClaimError(f"--claim: no program `{name}` in this bench (it has: {known})")


def check_names(claims: list[Claim], labels_and_refs: list[tuple[str, str | None]]) -> None:
    """Refuse a claim naming a program the bench will not run, before anything is measured."""
    items = [{"label": label, "ref": ref, "kind": "c" if (ref or "").startswith("C:") else "cancho"}
             for label, ref in labels_and_refs]
    for c in claims:
        _find(items, c.a)
        _find(items, c.b)


def _cpu(item: dict) -> list[float]:
    """The item's CPU time per run (user + sys, ms)."""
    return [u + s for u, s in zip(item["samples"]["user_ms"], item["samples"]["sys_ms"])]


def judge(claims: list[Claim], doc: dict) -> list[Verdict]:
    """Each claim against a bench document (``bench.document``)."""
    out = []
    for c in claims:
        a, b = _find(doc["items"], c.a), _find(doc["items"], c.b)
        pairs = [x / y for x, y in zip(_cpu(a), _cpu(b)) if y > 0]
        ratio = statistics.median(pairs) if pairs else float("inf")
        out.append(Verdict(c, ratio, _OPS[c.op](ratio, c.bound)))
    return out


def plain_lines(verdicts: list[Verdict]) -> list[str]:
    """What ``text/plain`` says: the claims and whether they hold, no figure."""
    return [f"claim {v.claim.text}: {'holds' if v.holds else 'DOES NOT HOLD'}" for v in verdicts]


def metadata(verdicts: list[Verdict]) -> list[dict]:
    return [{"claim": v.claim.text, "ratio": v.ratio, "holds": v.holds} for v in verdicts]
