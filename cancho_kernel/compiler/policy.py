"""Safe mode's policy, in one place below the CLI, `cancho test` and the kernel: what a safe run
is confined by, which limits bound it, and which programs it refuses (rule
`unsafe-in-safe-mode`).

Why the refusals depend on the sandbox: the sandbox (backends/sandbox.py) is the boundary, so
with it a program may run the whole library — an `extern fn` into libc, a linked library, `%%c`,
`Exec` of a system program — because whatever that code does, it does inside namespaces, a
read-only system, a seccomp filter and the limits. Without it (no bubblewrap, no user
namespaces) nothing would bound foreign code or another program, so safe mode refuses them and
says once what is missing (docs/teaching.md, "What the sandbox isolates, and what it does not").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .backends import confine, sandbox
from .backends.process import SAFE_CAPS, LimitCaps
from .diagnostics import Diagnostic, Rule


def safe_from_env() -> bool:
    """``CANCHO_SAFE=1`` (or true/yes/on) turns safe mode on for the CLI and the kernel."""
    return os.environ.get("CANCHO_SAFE", "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class SafePlan:
    """What safe mode does on this machine for one notebook directory: the sandbox every run
    starts in (None where it cannot start), the Landlock layer inside it (None without
    Landlock), and the warning to show once when either is missing."""

    sandbox: sandbox.SandboxSpec | None
    confine: confine.Confinement | None
    warning: str | None

    @property
    def sandboxed(self) -> bool:
        """Whether the operating system is the boundary (and the library may run)."""
        return self.sandbox is not None

    def caps(self) -> LimitCaps:
        """The safe caps with this plan's sandbox and confinement, which every run gets."""
        return replace(SAFE_CAPS, confine=self.confine, sandbox=self.sandbox)


def _warning(probe: sandbox.SandboxProbe, landlock: bool) -> str | None:
    """What is missing, in the words a teacher can act on; None when nothing is."""
    parts = []
    if not probe.ok:
        parts.append(f"safe mode cannot start its sandbox here ({probe.reason}), so it refuses "
                     "foreign code (`extern fn`, -l, %%c, C flags) and `Exec` "
                     "[unsafe-in-safe-mode], and a program's network is the server's")
    if not landlock:
        parts.append("safe mode cannot confine programs on disk with Landlock here (it needs "
                     "Linux 5.13 or later with Landlock enabled)" + ("" if probe.ok else
                                                       ": a program holding Fs can read and "
                                                       "write any file this server's user can"))
    if not parts:
        return None
    return "warning: " + "; ".join(parts) + " (docs/teaching.md)\n"


def plan_for(root: str | os.PathLike) -> SafePlan:
    """Safe mode's plan for a notebook directory (the sandbox probed once per process)."""
    real = os.path.realpath(os.fspath(root))
    probe = sandbox.probe()
    spec = sandbox.SandboxSpec(writable=(real,), cwd=real) if probe.ok else None
    landlock = confine.available()
    return SafePlan(spec, confine.Confinement.for_directory(real) if landlock else None,
                    _warning(probe, landlock))


def sandboxed() -> bool:
    """Whether safe runs on this machine start in the sandbox."""
    return sandbox.probe().ok


def library_refusal(flag: str) -> str | None:
    """Why ``-l``/``-L`` (``flag``) is refused in safe mode, or None when the sandbox bounds it."""
    if sandboxed():
        return None
    return (f"`{flag}` is refused in safe mode: a linked library is foreign code, and this "
            "machine has no sandbox to bound it [unsafe-in-safe-mode]")


def safe_mode_refusals(program, sandboxed_runs: bool | None = None) -> list[Diagnostic]:
    """The refusals of an accepted program in safe mode: none in the sandbox; without it, one
    per reachable foreign symbol at its `extern fn` declaration (the reference's supervisor
    check ``unbounded_by ⊆ granted`` with nothing granted, docs/authority-report.md; a
    declaration nothing calls is not reach), and one at the first function that performs
    `exec`. ``sandboxed_runs``: None asks the probe."""
    if sandboxed() if sandboxed_runs is None else sandboxed_runs:
        return []
    from .authority import authority_report

    report = authority_report(program)
    out = _foreign_refusals(program, report)
    out += _exec_refusals(program)
    return out


def _foreign_refusals(program, report) -> list[Diagnostic]:
    if report.bounded:
        return []
    by_symbol = {ref.name: ref for ref in program.externs.values()}
    out: list[Diagnostic] = []
    for entry in report.unbounded_by:
        scope, _, symbol = entry.partition(":")
        ref = by_symbol.get(symbol)
        span = getattr(getattr(ref, "decl", None), "name", None)
        out.append(Diagnostic(
            Rule.UNSAFE_IN_SAFE_MODE,
            f"safe mode refuses foreign code here: `{symbol}` (declared in `{scope}`) is "
            "reachable from `main`, and without the sandbox nothing bounds what it does",
            getattr(span, "span", None)))
    return out


def _exec_refusals(program) -> list[Diagnostic]:
    """One refusal at the first reachable function (in source order) performing `exec`."""
    performing = []
    for key in program.reachable():
        fn = program.fns.get(key)
        if fn is None or not any(label.name == "exec" for label in fn.performed):
            continue
        span = getattr(getattr(fn.item.decl, "name", None), "span", None)
        performing.append((span.line if span is not None else 0, key, span))
    if not performing:
        return []
    _, key, span = min(performing, key=lambda t: (t[0], str(t[1])))
    return [Diagnostic(
        Rule.UNSAFE_IN_SAFE_MODE,
        "safe mode refuses `Exec` here: this machine has no sandbox, so another program would "
        "run with all this server's user can do", span)]
