"""The authority report: what a program may reach (runtime.md §7).

Computed from the *performed* labels (before ownership discharge) of every function reachable
from `main`, and from the foreign functions called by reachable code — never from declared rows,
and never from the libc calls the runtime itself makes (`fwrite` behind `write_bytes` is not
foreign reach). Text and JSON are formatted exactly as the reference prints them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .check.types import LabelT

UNBOUNDED_HEADER = (
    "UNBOUNDED: this program calls foreign code. The labels below bound it",
    'everywhere except through the symbols under "unbounded by", and what',
    "a symbol does is the linked library's, not the language's.",
    "See docs/foreign-authority.md.",
)

# "never touches" categories, in report order, and the label names that touch each.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the console", ("io_read", "io_write", "err_write")),
    ("the filesystem", ("fs_read", "fs_write", "file_read", "file_write")),
    ("the network", ("net_out", "net_in", "conn_accept", "conn_read", "conn_write")),
    ("the heap", ("heap",)),
    ("the command line", ("args",)),
    ("signals", ("signals", "signals_read")),
    ("other programs", ("exec", "child_signal", "pipe_read", "pipe_write")),
    ("foreign code", ("ffi",)),
)


@dataclass
class AuthorityReport:
    """The report's facts; `text()` and `to_json()` render them."""

    labels: list[LabelT]
    foreign_symbols: list[str]
    unbounded_by: list[str]
    pure: list[str]
    functions: int
    folded_operators: int
    folded_calls: int
    data: dict = field(default_factory=dict)
    # `--target wasm32-wasip1`: the functions the built module imports (``backends/wasm.py``
    # reads its import section), what the WASI runtime is asked to grant; None for the host.
    wasi_imports: list[str] | None = None
    wasi_target: str | None = None

    @property
    def bounded(self) -> bool:
        return all(l.name != "ffi" for l in self.labels) and not self.unbounded_by

    @property
    def effects(self) -> list[str]:
        return sorted({l.name for l in self.labels})

    def untouched(self) -> list[str]:
        names = {l.name for l in self.labels}
        return [cat for cat, members in CATEGORIES if not names & set(members)]

    def text(self) -> str:
        out: list[str] = []
        if not self.bounded:
            out += UNBOUNDED_HEADER
        if self.labels:
            out.append("performs")
            for l in self.labels:
                out.append(f"    {l}" + ("    <- unbounded" if l.name == "ffi" else ""))
        else:
            out.append("performs nothing")
        never = self.untouched()
        if never:
            out.append("never touches")
            out += [f"    {c}" for c in never]
        if self.unbounded_by:
            out.append("unbounded by")
            out += [f"    {u}" for u in self.unbounded_by]
        if self.pure:
            out.append(f"provably pure ({len(self.pure)} of {self.functions})")
            out += [f"    {p}" for p in self.pure]
        if self.folded_operators or self.folded_calls:
            out.append("evaluated at compile time")
            out.append(f"    {self.folded_operators} operators")
            out.append(f"    {self.folded_calls} calls")
        if self.wasi_imports is not None:
            out.append(f"imports ({self.wasi_target})" if self.wasi_imports else f"imports nothing ({self.wasi_target})")
            out += [f"    {i}" for i in self.wasi_imports]
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict:
        return {
            "bounded": self.bounded,
            "unbounded_by": list(self.unbounded_by),
            "effects": self.effects,
            "labels": [{"name": l.name, "argument": l.arg, "bounded": l.name != "ffi"} for l in self.labels],
            "foreign_symbols": list(self.foreign_symbols),
            "pure": list(self.pure),
            "folded_operators": self.folded_operators,
            "folded_calls": self.folded_calls,
            "functions": self.functions,
            **({"wasi": {"target": self.wasi_target, "imports": list(self.wasi_imports)}}
               if self.wasi_imports is not None else {}),
        }

    def to_json(self) -> str:
        """Two-space indentation, the reference's key order; `unbounded_by` and `labels` one
        entry per line, the other lists inline."""
        d = self.to_dict()
        j = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731

        def lines(items: list[str]) -> str:
            if not items:
                return "[]"
            return "[\n" + ",\n".join(f"    {x}" for x in items) + "\n  ]"

        label_items = [
            f'{{ "name": {j(l["name"])}, "argument": {j(l["argument"])}, "bounded": {j(l["bounded"])} }}'
            for l in d["labels"]]
        body = [
            f'  "bounded": {j(d["bounded"])}',
            f'  "unbounded_by": {lines([j(u) for u in d["unbounded_by"]])}',
            f'  "effects": {j(d["effects"])}',
            f'  "labels": {lines(label_items)}',
            f'  "foreign_symbols": {j(d["foreign_symbols"])}',
            f'  "pure": {j(d["pure"])}',
            f'  "folded_operators": {d["folded_operators"]}',
            f'  "folded_calls": {d["folded_calls"]}',
            f'  "functions": {d["functions"]}',
            *([f'  "wasi": {j(d["wasi"])}'] if "wasi" in d else []),
        ]
        return "{\n" + ",\n".join(body) + "\n}\n"


def display_name(key: str) -> str:
    """`module.name`, or just `name` in the root module."""
    module, name = key.split("::")
    return f"{module}.{name}" if module else name


def authority_report(program) -> AuthorityReport:
    """The report for an accepted program (a `check.program.CheckedProgram`)."""
    reachable = program.reachable()
    fns = [program.fns[k] for k in reachable if k in program.fns and program.fns[k].sig.kind == "fn"]
    externs = [program.externs[k] for k in reachable if k in program.externs]
    labels: set[LabelT] = set()
    for fn in fns:
        labels |= set(fn.performed)
    ordered = sorted(labels, key=lambda l: (l.name, l.arg is not None, l.arg or ""))
    symbols = sorted({x.name for x in externs})
    unbounded = set()
    for x in externs:
        for l in x.sig.row:
            if l.name == "ffi":
                unbounded.add(f"{l.arg}:{x.name}")
    if any(l.name == "ffi" for l in labels) and not externs:
        unbounded.add("*")  # fail-closed: ffi performed but no reachable extern accounts for it
    pure = sorted(display_name(fn.item.key) for fn in fns if not fn.performed)
    rep = AuthorityReport(
        labels=ordered, foreign_symbols=symbols, unbounded_by=sorted(unbounded), pure=pure,
        functions=len(fns),
        folded_operators=sum(fn.folded_operators for fn in fns),
        folded_calls=sum(fn.folded_calls for fn in fns))
    rep.data = rep.to_dict()
    return rep


def with_wasi_imports(report: AuthorityReport, target_name: str, imports: list) -> AuthorityReport:
    """The report with the imports of the program's module built for a WASI target."""
    report.wasi_target, report.wasi_imports = target_name, [str(i) for i in imports]
    report.data = report.to_dict()
    return report
