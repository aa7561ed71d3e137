"""What one run of a library notebook showed, read from the executed notebook's own outputs: did
it run to the end or which cell failed, how many timing claims held, which figures differ from
the design document by more than 2×. ``scripts/build_library.py`` records it in the executed
notebook (``metadata.cancho.run``) and writes it into the library's index (issue 23, item 3).

A bench publishes its statements in its outputs' metadata under ``"cancho"``: either
``{"statements": [{"kind", "text", "value", "document", "verdict", "factor"}]}`` (claims and
figures) or, from a bench without figures, ``{"bench": {"claims": [{"claim", "ratio",
"holds"}]}}``; both are read, and an output carrying both counts once.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from enum import StrEnum

DIFFERS_BEYOND = 2.0   # a figure this many times off the document's (either way) is listed in the index

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Text without terminal colour codes (kernels colour their tracebacks)."""
    return _ANSI.sub("", text)


class StatementKind(StrEnum):
    CLAIM = "claim"     # fails the notebook when it does not hold
    FIGURE = "figure"   # shown beside the document's number; never fails


class RunStatus(StrEnum):
    EXECUTED = "executed"   # every cell ran (expected errors included)
    FAILED = "failed"       # a cell failed: the notebook did not reproduce its document
    STORED = "stored"       # not executed in this build: the outputs as committed


@dataclass(frozen=True)
class Statement:
    """One claim or figure as a bench cell stated it."""

    kind: StatementKind
    text: str                  # "A / B < K" for a claim, what was measured for a figure
    value: float | None        # this run's ratio
    document: float | None     # the design document's number, when it gives one
    held: bool                 # a claim held / a figure agrees with the document
    factor: float | None       # how far the figure is from the document's (≥ 1, either way)

    @property
    def differs(self) -> bool:
        return self.kind is StatementKind.FIGURE and self.factor is not None and self.factor > DIFFERS_BEYOND


@dataclass(frozen=True)
class Failure:
    """The cell that stopped the run."""

    cell_index: int            # among all cells, from 0
    cell_id: str | None        # the cell's id (nbformat ≥ 4.5): the exported page's anchor
    first_line: str            # the cell's first line, as the reader finds it
    message: str               # the error's last line, without colour codes


@dataclass(frozen=True)
class RunSummary:
    """A notebook's run as the index shows it and its metadata keeps."""

    status: RunStatus
    seconds: float | None
    statements: tuple[Statement, ...]
    failure: Failure | None = None

    @property
    def claims(self) -> tuple[Statement, ...]:
        return tuple(s for s in self.statements if s.kind is StatementKind.CLAIM)

    @property
    def claims_held(self) -> int:
        return sum(s.held for s in self.claims)

    @property
    def differing(self) -> tuple[Statement, ...]:
        return tuple(s for s in self.statements if s.differs)

    def to_json(self) -> dict:
        """The ``metadata.cancho.run`` record (JSON types only)."""
        d = asdict(self)
        d["claims_held"], d["claims_total"] = self.claims_held, len(self.claims)
        return d

    @classmethod
    def from_json(cls, d: dict) -> RunSummary:
        statements = tuple(Statement(StatementKind(s["kind"]), s["text"], s.get("value"), s.get("document"),
                                     bool(s["held"]), s.get("factor")) for s in d.get("statements", []))
        f = d.get("failure")
        failure = Failure(f["cell_index"], f.get("cell_id"), f["first_line"], f["message"]) if f else None
        return cls(RunStatus(d["status"]), d.get("seconds"), statements, failure)


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _factor(value: float | None, document: float | None, given) -> float | None:
    """How many times apart a figure and the document's number are, as a number ≥ 1."""
    f = _number(given)
    if f is None and value is not None and document is not None and value > 0 and document > 0:
        f = value / document
    if f is None or f <= 0:
        return None
    return max(f, 1 / f)


def _statement(s: dict) -> Statement | None:
    try:
        kind = StatementKind(s.get("kind"))
    except ValueError:
        return None
    value, document = _number(s.get("value")), _number(s.get("document"))
    held = s.get("verdict") in ("held", "holds")
    return Statement(kind, str(s.get("text", "")), value, document, held, _factor(value, document, s.get("factor")))


def statements_of_output(metadata: dict) -> list[Statement]:
    """The statements one output's metadata carries (either form; the richer one when both)."""
    meta = metadata.get("cancho") if isinstance(metadata, dict) else None
    if not isinstance(meta, dict):
        return []
    listed = meta.get("statements")
    if not isinstance(listed, list):
        bench = meta.get("bench")
        listed = bench.get("statements") if isinstance(bench, dict) else None
    if isinstance(listed, list):
        return [s for s in map(_statement, (x for x in listed if isinstance(x, dict))) if s is not None]
    bench = meta.get("bench")
    claims = bench.get("claims", []) if isinstance(bench, dict) else []
    return [Statement(StatementKind.CLAIM, str(c.get("claim", "")), _number(c.get("ratio")), None,
                      bool(c.get("holds")), None) for c in claims if isinstance(c, dict)]


def statements_of(nb) -> tuple[Statement, ...]:
    """Every statement in a notebook's outputs, in order."""
    out: list[Statement] = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else ():
            out += statements_of_output(o.get("metadata", {}))
    return tuple(out)


def failing_cell(nb, error: BaseException | None = None) -> Failure | None:
    """The first cell whose error was not expected (no ``raises-exception`` tag), or, when the run
    stopped without one (a timeout, a dead kernel), the first code cell that did not complete."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                return _failure(i, cell, f"{o.get('ename', '')}: {o.get('evalue', '')}")
    if error is None:
        return None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.strip() and cell.get("execution_count") is None:
            return _failure(i, cell, f"{type(error).__name__}: {error}")
    return _failure(None, None, f"{type(error).__name__}: {error}")


def _failure(i: int | None, cell, message: str) -> Failure:
    lines = [ln for ln in strip_ansi(message).strip().splitlines() if ln.strip()]
    first = next((ln for ln in (cell.source.splitlines() if cell is not None else []) if ln.strip()), "")
    return Failure(-1 if i is None else i, cell.get("id") if cell is not None else None, first[:200],
                   (lines[0] if lines else "")[:300])


def summarise(nb, status: RunStatus, seconds: float | None, error: BaseException | None = None) -> RunSummary:
    """The run of ``nb`` (already executed, or stored) as the index shows it."""
    failure = failing_cell(nb, error) if status is RunStatus.FAILED else None
    return RunSummary(status, seconds, statements_of(nb), failure)
