"""Named programs: cancho cells kept by ``%%run --name`` / ``%%bench --name`` and C baselines from
``%%c NAME``, so a later ``%bench A B`` can run them again.

Two namespaces: cancho programs and C baselines may share a name (``putchar`` and ``C:putchar``).
A bare name finds the cancho program first, then the baseline; ``c:NAME`` / ``C:NAME`` always
means the baseline.

* a ``jit`` program keeps its LLVM IR and reruns on the kernel's warm JIT worker;
* an ``exe`` program and a C baseline keep their linked binary in the store's temporary
  directory (one per kernel, removed at shutdown).

Every program remembers how long it took to build: ``compile`` (check + lower + object code for
cancho, ``cc -O2 -c`` for C) and ``link`` (``cc``), reported apart from run times.
"""

from __future__ import annotations

import re
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..compiler.backends.process import RunLimits, RunResult, StdoutTarget, owned_temp_prefix
from ..compiler.run import Backend, Built, run_built

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def valid_name(name: str) -> bool:
    return bool(NAME_RE.match(name))


@dataclass
class Program:
    """One runnable program the session can bench."""

    name: str
    kind: str                          # "cancho" | "c"
    backend: str                       # "jit" | "exe" | "cc"
    ir: str | None = None              # jit (and exe, for rebuilding)
    path: Path | None = None           # exe and C: the linked binary
    compile_seconds: float | None = None
    link_seconds: float | None = None
    mcjit_seconds: float | None = None  # jit: MCJIT time of the last run
    stdin: bytes = b""                 # what it was kept with (bench options override)
    args: list[str] = field(default_factory=list)
    origin: str | None = None          # the cell that defined it
    source: str | None = None          # the program text (C) or cell text (cancho)

    @property
    def label(self) -> str:
        return f"C {self.name}" if self.kind == "c" else self.name

    @property
    def ref(self) -> str:
        return f"C:{self.name}" if self.kind == "c" else self.name

    def run(self, runner, *, stdin: bytes, args: list[str], target: StdoutTarget, limits: RunLimits,
            cancel: threading.Event | None) -> RunResult:
        """Run once, on the one run path (``compiler.run``). Raises ``RunFailed`` when the program
        cannot be started."""
        from .runner import RunRequest

        if self.kind == "cancho" and self.backend == "jit":
            assert self.ir is not None
            return runner.run_blocking(RunRequest(ir=self.ir, backend="jit", target=target, stdin=stdin,
                                                  args=args, limits=limits), cancel)
        assert self.path is not None
        argv0 = "main" if self.kind == "cancho" else self.name
        built = Built(Backend.EXE, self.ir or "", path=self.path)
        return run_built(built, [argv0, *args], stdin=stdin, target=target,
                         limits=runner.bounded(limits), cancel=cancel)


class ProgramStore:
    """The session's named programs and their temporary directory."""

    def __init__(self) -> None:
        self.cancho: dict[str, Program] = {}
        self.c: dict[str, Program] = {}
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._serial = 0

    def new_path(self, stem: str, suffix: str = "") -> Path:
        """A fresh file name in the store's directory (a rebuilt program never overwrites a binary
        an earlier entry may still point at)."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=owned_temp_prefix("programs"))
        self._serial += 1
        return Path(self._tmp.name) / f"{stem}-{self._serial}{suffix}"

    def put(self, program: Program) -> bool:
        """Keep ``program``; True when it replaced one of the same name and kind."""
        table = self.c if program.kind == "c" else self.cancho
        replaced = program.name in table
        table[program.name] = program
        return replaced

    def resolve(self, ref: str) -> Program | None:
        low = ref.lower()
        if low.startswith("c:"):
            return self.c.get(ref[2:])
        return self.cancho.get(ref) or self.c.get(ref)

    def names(self) -> list[str]:
        return sorted(self.cancho) + sorted(f"C:{n}" for n in self.c)

    def all(self) -> list[Program]:
        return [self.cancho[n] for n in sorted(self.cancho)] + [self.c[n] for n in sorted(self.c)]

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
