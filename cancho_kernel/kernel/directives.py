"""Cell directives (magics) and the execution of one cell.

A cell starts with any number of directive lines (kernel.md §2.3), then its cancho text:

* ``%name args`` — a line directive, run in order before the cell's text is handled;
* ``%%name args`` — at most one cell directive, which decides what happens to the cell's text
  (without one, a cell with ``main`` is compiled and run, a cell without is checked and its
  items join the session).

Blank lines and nbval's ``# NBVAL_...`` comment lines among the directives are skipped.
Diagnostics keep pointing at the cell's own lines: the text after the directives is a
``SourceFile`` whose ``line_offset`` is the number of lines removed.

Every directive is registered in :data:`REGISTRY` with its usage and help; an unknown directive
is an error that names the known ones.

Every value a directive takes is validated (numbers finite and in range, sizes parsed strictly,
paths checked) and every file it reads is read up to a documented cap (:data:`STDIN_FILE_CAP`,
:data:`LOAD_CAP`), so no cell can make the kernel read without bound. In safe mode
(:attr:`Settings.safe`) `%%c` and C flags are refused, paths must stay inside the notebook's
directory (:attr:`Settings.root`, symlinks resolved), and run limits may not exceed
:data:`process.SAFE_CAPS`. ``bench.py`` (``%%c``, ``%bench``, ``%%bench``,
``%programs``) and ``authority_view.py`` (``%authority``, ``%%authority``) register theirs the same
way; they are imported at the end of this module.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import re
import shlex
import signal as _signal
import stat
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..compiler.backends import native
from ..compiler.backends.process import (DEFAULT_RUN_LIMITS, SAFE_CAPS, RunLimits, StdoutKind,
                                        StdoutTarget)
from ..compiler.diagnostics import RULES
from ..compiler.source import SourceFile
from . import presentation as P
from .runner import BACKENDS, RunRequest
from .session import Session


class DirectiveError(Exception):
    """A directive could not be understood (unknown name, bad option)."""


# -- the context a directive works in ----------------------------------------------------------------


def _bench_runs_from_env() -> int | None:
    """``CANCHO_BENCH_RUNS=N``: the full mode of a notebook's benches (every bench N runs,
    whatever its ``--runs``), for figures to quote; unset, cells keep their own (quick) counts."""
    text = os.environ.get("CANCHO_BENCH_RUNS", "").strip()
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        return None
    return n if 1 <= n <= 1000 else None


@dataclass
class Settings:
    """Session-wide defaults, changed by ``%backend`` and ``%limits``; and the kernel's safe
    mode, fixed when it starts: ``root`` is the notebook's directory (the kernel's working
    directory at start), the only place safe mode lets a path reach."""

    backend: str = "jit"
    timeout: float | None = DEFAULT_RUN_LIMITS.timeout
    max_output: int | None = DEFAULT_RUN_LIMITS.max_output
    memory: int | None = DEFAULT_RUN_LIMITS.memory
    cpu_seconds: int | None = DEFAULT_RUN_LIMITS.cpu_seconds
    processes: int | None = DEFAULT_RUN_LIMITS.processes
    bench_runs: int | None = field(default_factory=_bench_runs_from_env)
    safe: bool = False
    root: Path = field(default_factory=lambda: Path.cwd().resolve())

    def run_limits(self) -> RunLimits:
        """The session's default limits of one run."""
        return RunLimits(timeout=self.timeout, max_output=self.max_output, memory=self.memory,
                         cpu_seconds=self.cpu_seconds, processes=self.processes)


class Context(Protocol):
    """What the kernel gives a directive: the session and ways to publish."""

    session: Session
    runner: object
    settings: Settings
    failed: bool

    def stream(self, name: str, text: str) -> None: ...
    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None: ...
    def update(self, data: dict, metadata: dict | None = None, *, display_id: str) -> None: ...
    def result(self, data: dict, metadata: dict | None = None) -> None: ...
    def fail(self, failure: P.Failure) -> None: ...
    def page(self, text: str) -> None: ...
    def clear(self) -> None: ...


@dataclass
class Body:
    """The cell's cancho text after its directives."""

    text: str
    line_offset: int = 0
    path: str | None = None   # a file for `%load`, else the cell
    cell_name: str | None = None  # `cell[N]`, N the execution count

    @property
    def blank(self) -> bool:
        return not self.text.strip()

    def source(self, session: Session) -> SourceFile:
        return session.new_source(self.text, self.line_offset, self.path or self.cell_name)


Handler = Callable[[Context, str, Body], None]


@dataclass
class Directive:
    name: str          # with its % or %% prefix
    usage: str
    help: str
    handler: Handler
    # A line directive may replace the cell's body (`%load`); it then returns the new Body.

    @property
    def is_cell(self) -> bool:
        return self.name.startswith("%%")


REGISTRY: dict[str, Directive] = {}


def directive(name: str, usage: str, help: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        REGISTRY[name] = Directive(name, usage, help, fn)
        return fn
    return register


def known_names() -> str:
    return ", ".join(sorted(REGISTRY))


HELP_HEAD = "cancho kernel directives (lines at the top of a cell):"
HELP_TAIL = ("Without a cell directive, a cell with `fn main(world: World) -> [] int` is compiled with the "
             "session's items and run; a cell without one is checked and its items join the session "
             "(re-running a cell replaces its items).")


def _help_entries() -> list[Directive]:
    return sorted(REGISTRY.values(), key=lambda d: (not d.is_cell, d.name))


def _mib(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20} MiB"


def limits_text() -> str:
    """The default run limits, the caps and the read caps, as %help and README state them."""
    d, c = DEFAULT_RUN_LIMITS, SAFE_CAPS
    return (f"Default run limits: timeout {d.timeout:g} s (wall), memory {_mib(d.memory)} (the program's "
            f"address space), CPU {d.cpu_seconds} s, {d.processes} processes more than the user runs "
            f"(RLIMIT_NPROC, not applied to root), output {_mib(d.max_output)} kept per stream. "
            f"Reads: --stdin-file up to {_mib(STDIN_FILE_CAP)}, %load up to {_mib(LOAD_CAP)}.")


def safe_text(settings: "Settings | None") -> str:
    c = SAFE_CAPS
    if settings is None or not settings.safe:
        return ("Safe mode is off (turn it on with CANCHO_SAFE=1 or CanchoKernel.safe_mode = True "
                "when the kernel starts).")
    return (f"Safe mode is ON: programs that reach foreign code (`extern fn`) are refused "
            f"[unsafe-in-safe-mode]; %%c and --cflags/--ldflags are refused; paths for %load, %%file, "
            f"--stdin-file and file:PATH must be inside {settings.root}; limits may be lowered, not "
            f"raised beyond timeout {c.timeout:g} s, memory {_mib(c.memory)}, CPU {c.cpu_seconds} s, "
            f"{c.processes} processes, output {_mib(c.max_output)}.")


def help_text(settings: "Settings | None" = None) -> str:
    lines = [HELP_HEAD, ""]
    for d in _help_entries():
        lines.append(f"  {d.usage}")
        lines.append(f"      {d.help}")
    lines += ["", *textwrap.wrap(HELP_TAIL, 96), "", *textwrap.wrap(limits_text(), 96),
              "", *textwrap.wrap(safe_text(settings), 96)]
    return "\n".join(lines)


def help_html(settings: "Settings | None" = None) -> str:
    """The same list as a table: JupyterLab and nbconvert show HTML, and a table wraps."""
    rows = "".join(f"<tr><td style=\"text-align:left;white-space:nowrap\"><code>{html.escape(d.name)}</code></td>"
                   f"<td style=\"text-align:left\"><code>{html.escape(d.usage)}</code><br>{html.escape(d.help)}</td></tr>"
                   for d in _help_entries())
    return (f"<p>{html.escape(HELP_HEAD)}</p><table class=\"cancho-help\"><tbody>{rows}</tbody></table>"
            f"<p>{html.escape(HELP_TAIL)}</p><p>{html.escape(limits_text())}</p>"
            f"<p>{html.escape(safe_text(settings))}</p>")


# -- parsing a cell's header -----------------------------------------------------------------------


@dataclass
class Header:
    lines: list[tuple[str, str]] = field(default_factory=list)   # (name, args) of % directives
    cell: tuple[str, str] | None = None                           # (name, args) of the %% one
    body: Body = field(default_factory=lambda: Body(""))


def parse_header(code: str) -> Header:
    lines = code.split("\n")
    h = Header()
    i = 0
    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        if not s or s.startswith("# NBVAL") or s.startswith("#NBVAL"):
            i += 1
            continue
        if not s.startswith("%"):
            break
        word, _, args = s.partition(" ")
        args = args.strip()
        if word not in REGISTRY:
            raise DirectiveError(f"unknown directive `{word}`; the known ones are {known_names()}")
        if word.startswith("%%"):
            if h.cell is not None:
                raise DirectiveError(f"a cell takes one cell directive, but `{h.cell[0]}` and `{word}` were both given")
            h.cell = (word, args)
        else:
            h.lines.append((word, args))
        i += 1
    body_lines = lines[i:]
    h.body = Body("\n".join(body_lines), line_offset=i)
    return h


def execute(ctx: Context, code: str, cell_name: str | None = None) -> None:
    """Handle one cell: its directives, then its text."""
    try:
        header = parse_header(code)
        if ctx.settings.safe:
            for name, args in [*header.lines, *([header.cell] if header.cell else [])]:
                safe_screen(name, args, ctx.settings)
    except DirectiveError as e:
        ctx.fail(P.simple_failure("directive-error", str(e)))
        return
    body = header.body
    body.cell_name = cell_name
    try:
        for name, args in header.lines:
            new_body = REGISTRY[name].handler(ctx, args, body)
            if isinstance(new_body, Body):
                body = new_body
            if ctx.failed:
                return
        if header.cell is not None:
            name, args = header.cell
            REGISTRY[name].handler(ctx, args, body)
        elif not body.blank:
            default_cell(ctx, body)
    except DirectiveError as e:
        ctx.fail(P.simple_failure("directive-error", str(e)))


# -- option parsing ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that reports to the cell instead of exiting, and takes options only as written
    in full (an abbreviation could slip past safe mode's screen of option names)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # never exit the kernel
        raise DirectiveError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:
        raise DirectiveError(message or f"{self.prog}: bad options")


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?$")
_UNITS = {None: 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNLIMITED = ("none", "unlimited")


@dataclass(frozen=True)
class Bound:
    """The range a directive's number may take, and whether `none` (unlimited) is allowed."""

    flag: str
    low: float
    high: float
    unlimited: bool = True


TIMEOUT = Bound("--timeout", 0.0, 7 * 24 * 3600.0)        # seconds, exclusive low
MEMORY = Bound("--memory", 16 << 20, 1 << 40)              # bytes
MAX_OUTPUT = Bound("--max-output", 0, 256 << 20, unlimited=False)  # kept in the kernel's memory
CPU = Bound("--cpu", 1, 7 * 24 * 3600)                      # seconds
PROCESSES = Bound("--processes", 0, 1 << 20)                # more than the user runs
STDIN_FILE_CAP = 64 << 20
LOAD_CAP = 8 << 20


def _shown_size(n: float) -> str:
    return _mib(int(n)) if n >= 1 << 20 else f"{n:g} bytes"


def parse_size(text: str, bound: Bound = MEMORY) -> int | None:
    """``1048576``, ``64k``, ``1M``, ``2MiB``, ``1.5G``; ``none``/``unlimited`` (and, where
    unlimited is allowed, ``0``) means unlimited. Anything else — ``inf``, ``nan``, ``1e9``, a
    sign, a value outside ``bound`` — is a directive error."""
    t = text.strip().lower()
    if t in _UNLIMITED or (t == "0" and bound.unlimited):
        if not bound.unlimited:
            raise DirectiveError(f"{bound.flag} cannot be unlimited: write a size up to "
                                 f"{_shown_size(bound.high)}")
        return None
    m = _SIZE.match(t)
    if not m:
        raise DirectiveError(f"{bound.flag}: `{text}` is not a size (write e.g. 65536, 64k, 1M, 2GiB)")
    n = int(float(m.group(1)) * _UNITS[m.group(2)])
    if not bound.low <= n <= bound.high:
        raise DirectiveError(f"{bound.flag}: `{text}` is out of range ({_shown_size(bound.low)} to "
                             f"{_shown_size(bound.high)})")
    return n


def parse_seconds(text: str, bound: Bound = TIMEOUT) -> float | None:
    """A positive, finite number of seconds within ``bound`` (``2``, ``0.5``, ``10s``);
    ``none``/``unlimited``/``0`` means unlimited."""
    t = text.strip().lower()
    if t in (*_UNLIMITED, "0"):
        return None
    if t.endswith("s"):
        t = t[:-1]
    try:
        v = float(t)
    except ValueError:
        raise DirectiveError(f"{bound.flag}: `{text}` is not a number of seconds") from None
    if not math.isfinite(v) or v <= bound.low or v > bound.high:
        raise DirectiveError(f"{bound.flag}: `{text}` is not a number of seconds above "
                             f"{bound.low:g} and at most {bound.high:g}")
    return v


def parse_count(text: str, bound: Bound) -> int | None:
    """A whole number within ``bound``; ``none``/``unlimited`` means unlimited."""
    t = text.strip().lower()
    if t in _UNLIMITED:
        return None
    if not (t.isascii() and t.isdigit()) or not bound.low <= int(t) <= bound.high:
        raise DirectiveError(f"{bound.flag}: `{text}` is not a whole number from {bound.low:g} "
                             f"to {bound.high:g} (or none)")
    return int(t)


# -- safe mode and paths ------------------------------------------------------------------------------

SAFE_REFUSED_DIRECTIVES = {"%%c": "%%c compiles and runs C, which nothing bounds"}
SAFE_REFUSED_OPTIONS = {"--cflags": "C compiler flags can run any program (e.g. -wrapper)",
                        "--ldflags": "linker flags can run any program and link any library"}


def _option_values(words: list[str], flag: str) -> list[str]:
    """Every value given to ``flag`` (``--flag V`` or ``--flag=V``)."""
    out = []
    for i, w in enumerate(words):
        if w == flag and i + 1 < len(words):
            out.append(words[i + 1])
        elif w.startswith(flag + "="):
            out.append(w[len(flag) + 1:])
    return out


def safe_screen(name: str, args: str, settings: Settings) -> None:
    """Safe mode's screen of one directive line, whichever module handles the directive (so
    `%%bench` and `%bench` are held to it too): refused directives and options, paths outside
    the notebook's directory, limits above the caps."""
    if name in SAFE_REFUSED_DIRECTIVES:
        raise DirectiveError(f"{name} is refused in safe mode: {SAFE_REFUSED_DIRECTIVES[name]}")
    words = split_args(args)
    for flag, why in SAFE_REFUSED_OPTIONS.items():
        if _option_values(words, flag) or flag in words:
            raise DirectiveError(f"{flag} is refused in safe mode: {why}")
    for path in _option_values(words, "--stdin-file"):
        checked_path(path, settings, "--stdin-file")
    for target in _option_values(words, "--stdout"):
        if target.startswith("file:"):
            checked_path(target[len("file:"):], settings, "--stdout file:")
    parsers = {"--timeout": lambda t: parse_seconds(t), "--memory": lambda t: parse_size(t, MEMORY),
               "--max-output": lambda t: parse_size(t, MAX_OUTPUT), "--cpu": lambda t: parse_count(t, CPU),
               "--processes": lambda t: parse_count(t, PROCESSES)}
    caps = {"--timeout": SAFE_CAPS.timeout, "--memory": SAFE_CAPS.memory, "--max-output": SAFE_CAPS.max_output,
            "--cpu": SAFE_CAPS.cpu_seconds, "--processes": SAFE_CAPS.processes}
    for flag, parse in parsers.items():
        for text in _option_values(words, flag):
            value = parse(text)
            if value is None or value > caps[flag]:
                shown = "unlimited" if value is None else text
                raise DirectiveError(f"{flag} {shown} is refused in safe mode: at most {caps[flag]:g}"
                                     + (" s" if flag in ("--timeout", "--cpu") else
                                        "" if flag == "--processes" else " bytes"))


def checked_path(text: str, settings: Settings, what: str) -> Path:
    """The path a directive names, resolved against the notebook's directory. In safe mode it
    must stay inside that directory once every symlink is resolved (``..``, an absolute path, a
    link pointing out, ``/proc/self/...`` are all refused)."""
    if not text:
        raise DirectiveError(f"{what} needs a path")
    if "\0" in text:
        raise DirectiveError(f"{what}: a path cannot contain a NUL character")
    path = Path(os.path.expanduser(text))
    if not settings.safe:
        return path
    full = (path if path.is_absolute() else settings.root / path).resolve()
    root = settings.root
    if full != root and root not in full.parents:
        raise DirectiveError(f"{what} `{text}` is refused in safe mode: it is outside the notebook's "
                             f"directory {root}")
    return full


def read_capped(path: Path, cap: int, what: str, shown: str) -> bytes:
    """At most ``cap`` bytes of a file; more is a directive error, whatever the file is (a
    regular file is judged by its size first; a device such as /dev/zero is read only up to the
    cap). A directory, a FIFO or a socket (which could block the kernel) is refused."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise DirectiveError(f"{what}: `{shown}` is a directory")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise DirectiveError(f"{what}: `{shown}` is not a regular file")
        if stat.S_ISREG(st.st_mode) and st.st_size > cap:
            raise DirectiveError(f"{what}: `{shown}` is {st.st_size} bytes, more than the {_mib(cap)} "
                                 f"the kernel reads")
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            chunks, total = [], 0
            while total <= cap:
                chunk = os.read(fd, min(1 << 20, cap + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        finally:
            os.close(fd)
    except BlockingIOError:
        raise DirectiveError(f"{what}: `{shown}` has nothing to read now (a terminal or device that "
                             "would block the kernel)") from None
    except OSError as e:
        raise DirectiveError(f"{what}: cannot read `{shown}`: {e.strerror or e}") from None
    if total > cap:
        raise DirectiveError(f"{what}: `{shown}` is more than the {_mib(cap)} the kernel reads")
    return b"".join(chunks)


def parse_signal(text: str) -> int:
    t = text.strip().upper()
    if t.isascii() and t.isdigit():
        if not 1 <= int(t) < _signal.NSIG:
            raise DirectiveError(f"`{text}` is not a signal number (1 to {_signal.NSIG - 1})")
        return int(t)
    if not t.startswith("SIG"):
        t = "SIG" + t
    try:
        return int(_signal.Signals[t])
    except KeyError:
        raise DirectiveError(f"`{text}` is not a signal name (write e.g. SIGILL, SIGPIPE or a number)") from None


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def stdin_of(ns, default: bytes | None = b"", settings: Settings | None = None) -> bytes | None:
    """Standard input from `--stdin TEXT` or `--stdin-file PATH` (read now, whole, at most
    :data:`STDIN_FILE_CAP` bytes), else default. With ``settings``, the path is checked against
    safe mode here too (:func:`safe_screen` checks it for every directive anyway)."""
    text, path = getattr(ns, "stdin", None), getattr(ns, "stdin_file", None)
    if text is not None and path is not None:
        raise DirectiveError("give --stdin or --stdin-file, not both")
    if path is not None:
        where = checked_path(path, settings, "--stdin-file") if settings is not None else \
            Path(os.path.expanduser(path))
        return read_capped(where, STDIN_FILE_CAP, "--stdin-file", path)
    return unescape(text) if text is not None else default


def unescape(text: str) -> bytes:
    """``--stdin`` text: the escapes \\n \\t \\r \\0 \\\\ are understood; the rest is UTF-8."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out).encode("utf-8")


def split_args(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError as e:
        raise DirectiveError(f"cannot split the options: {e}") from None


@dataclass
class RunOptions:
    backend: str
    target: StdoutTarget
    stdin: bytes
    args: list[str]
    limits: RunLimits
    expect_status: int | None = None
    expect_signal: int | None = None
    name: str | None = None   # `--name NAME`: keep the compiled program for %bench


def _run_parser() -> _Parser:
    p = _Parser(prog="%%run", add_help=False)
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--stdout", default="pipe")
    p.add_argument("--stdin", default=None)
    p.add_argument("--stdin-file", default=None)
    p.add_argument("--args", nargs="*", default=[])
    p.add_argument("--timeout", default=None)
    p.add_argument("--max-output", default=None)
    p.add_argument("--memory", default=None)
    p.add_argument("--cpu", default=None)
    p.add_argument("--processes", default=None)
    p.add_argument("--expect-status", default=None)
    p.add_argument("--expect-signal", default=None)
    p.add_argument("--expect-trap", action="store_true")
    p.add_argument("--name", default=None)
    return p


def parse_stdout_target(text: str, settings: Settings) -> StdoutTarget:
    """A cell's ``--stdout``: a known target, a checked ``file:PATH``, never ``inherit``."""
    try:
        target = StdoutTarget.parse(text)
    except ValueError as e:
        detail = str(e) if "broken-pipe:" in str(e) else f"unknown stdout target `{text}`"
        raise DirectiveError(f"{detail}: use pipe, /dev/full, /dev/null, file:PATH, closed or "
                             f"broken-pipe[:N]") from None
    if target.kind is StdoutKind.INHERIT:
        raise DirectiveError("a notebook cell cannot inherit the kernel's stdout")
    if target.kind is StdoutKind.FILE:
        assert target.path is not None
        target = StdoutTarget.file(str(checked_path(target.path, settings, "--stdout file:")))
    return target


def limits_of(ns, settings: Settings) -> RunLimits:
    """The run limits a directive's options give (``ns.timeout`` ...), the session's otherwise."""
    def opt(name: str, parse, default):
        value = getattr(ns, name, None)
        return parse(value) if value is not None else default

    return RunLimits(
        timeout=opt("timeout", parse_seconds, settings.timeout),
        max_output=opt("max_output", lambda t: parse_size(t, MAX_OUTPUT), settings.max_output),
        memory=opt("memory", lambda t: parse_size(t, MEMORY), settings.memory),
        cpu_seconds=opt("cpu", lambda t: parse_count(t, CPU), settings.cpu_seconds),
        processes=opt("processes", lambda t: parse_count(t, PROCESSES), settings.processes))


def _check_caps(limits: RunLimits, settings: Settings) -> None:
    if settings.safe:
        over = SAFE_CAPS.violations(limits)
        if over:
            raise DirectiveError("refused in safe mode: " + "; ".join(over))


def parse_run_options(args: str, settings: Settings) -> RunOptions:
    ns = _run_parser().parse_args(split_args(args))
    target = parse_stdout_target(ns.stdout, settings)
    limits = limits_of(ns, settings)
    _check_caps(limits, settings)
    expect_status = None
    if ns.expect_status is not None:
        t = ns.expect_status.strip()
        if not (t.isascii() and t.isdigit()) or int(t) > 255:
            raise DirectiveError(f"--expect-status: `{ns.expect_status}` is not an exit status (0 to 255)")
        expect_status = int(t)
    expect_signal = parse_signal(ns.expect_signal) if ns.expect_signal else None
    if ns.expect_trap:
        expect_signal = int(_signal.SIGILL)
    if expect_signal is not None and expect_status is not None:
        raise DirectiveError("give --expect-status or --expect-signal, not both")
    return RunOptions(ns.backend or settings.backend, target,
                      stdin_of(ns, settings=settings), list(ns.args), limits,
                      expect_status, expect_signal, ns.name)


# -- what a cell's text does ------------------------------------------------------------------------


def default_cell(ctx: Context, body: Body) -> None:
    run_body(ctx, body, parse_run_options("", ctx.settings), use_last_main=False)


def run_body(ctx: Context, body: Body, opts: RunOptions, use_last_main: bool) -> None:
    """Check the cell with the session; commit it when accepted; run `main` if there is one."""
    outcome = ctx.session.process(body.source(ctx.session), compile=True, use_last_main=use_last_main)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return
    if opts.name is not None and not outcome.has_main:
        raise DirectiveError("%%run --name keeps a program: the cell needs a `main` (or run one first)")
    ctx.session.commit(outcome)
    if not outcome.has_main:
        ctx.display({"text/plain": P.defined_text(outcome)})
        return
    kept = None
    if opts.name is not None:
        from .bench import BenchFailed, keep_named
        try:
            kept = keep_named(ctx, opts.name, outcome, opts, outcome.source.path)
        except BenchFailed as e:
            ctx.fail(e.failure)
            return
    run_ir(ctx, outcome.ir, opts, kept)


def run_ir(ctx: Context, ir: str, opts: RunOptions, kept=None) -> None:
    req = RunRequest(ir=ir, backend=opts.backend, target=opts.target, stdin=opts.stdin,
                     args=opts.args, limits=opts.limits)
    outcome = ctx.runner.run(req)
    result, failed = outcome.result, outcome.failure
    if result is not None:
        if result.stdout:
            ctx.stream("stdout", result.stdout.decode("utf-8", errors="replace"))
        if result.stderr:
            ctx.stream("stderr", result.stderr.decode("utf-8", errors="replace"))
    if failed is not None:
        if outcome.interrupted:
            ctx.fail(P.simple_failure("KeyboardInterrupt", "interrupted before the program started"))
        else:
            ctx.fail(P.simple_failure(failed.kind.value, failed.message))
        return
    assert result is not None
    failure = P.judge(result, opts.target, opts.expect_status, opts.expect_signal)
    meta = P.run_metadata(result, opts.backend, opts.target)
    text = P.summary(result, opts.target)
    if kept is not None:
        if result.compile_seconds is not None and kept.backend == "jit":
            kept.mcjit_seconds = result.compile_seconds
        text += f"\nkept as `{kept.name}` ({kept.backend}) for %bench"
        meta["cancho"]["kept_as"] = kept.name
    if failure is not None:
        ctx.fail(failure)
    else:
        ctx.result({"text/plain": text}, meta)


# -- the directives -----------------------------------------------------------------------------------


@directive("%%run", "%%run [--backend jit|exe] [--stdout pipe|/dev/full|/dev/null|file:PATH|closed|broken-pipe[:N]] "
           "[--stdin TEXT | --stdin-file PATH] [--args A B ...] [--timeout S] [--max-output N] [--memory N] "
           "[--cpu S] [--processes N] [--expect-status N | --expect-signal SIG | --expect-trap] [--name NAME]",
           "compile the cell with the session and run it with these options; without a `main` in the "
           "cell, the last `main` runs again; --name keeps the program for %bench. Limits apply to the "
           "program only (see %limits); --stdin-file reads at most 64 MiB")
def _run(ctx: Context, args: str, body: Body) -> None:
    opts = parse_run_options(args, ctx.settings)
    if body.blank:
        if ctx.session.last_main is None:
            raise DirectiveError("%%run: no `main` yet: write `fn main(world: World) -> [] int` in the cell")
    run_body(ctx, body, opts, use_last_main=True)


@directive("%%check", "%%check", "check the cell with the session's items without running it; "
           "accepted items join the session")
def _check(ctx: Context, args: str, body: Body) -> None:
    if args:
        raise DirectiveError("%%check takes no options")
    outcome = ctx.session.process(body.source(ctx.session), compile=False)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return
    ctx.session.commit(outcome)
    text = P.defined_text(outcome)
    if outcome.has_main:
        text = "accepted: `main` was checked, not run" + ("" if text == "nothing defined" else "\n" + text)
    ctx.display({"text/plain": text})


@directive("%%refused", "%%refused RULE", "the cell must be refused with RULE: the diagnostic is shown as "
           "output and the cell succeeds; it fails if the cell is accepted or refused with another rule "
           "(the session does not change)")
def _refused(ctx: Context, args: str, body: Body) -> None:
    words = split_args(args)
    if len(words) != 1:
        raise DirectiveError("%%refused takes one rule tag, e.g. `%%refused effect-not-declared`")
    rule = words[0]
    if rule not in RULES:
        raise DirectiveError(f"%%refused: `{rule}` is not a rule tag; the rules are {', '.join(RULES)}")
    outcome = ctx.session.process(body.source(ctx.session), compile=False)
    if outcome.ok:
        ctx.fail(P.simple_failure("not-refused", f"expected a refusal with `{rule}`, but the cell was accepted"))
        return
    rules = [d.rule for d in outcome.diagnostics]
    if rule in rules:
        ctx.display({"text/plain": f"refused as expected: {rule}\n\n" + P.refusal_plain(outcome.diagnostics)},
                    {"cancho": {"refused": rules}})
        return
    f = P.refusal(outcome.diagnostics)
    f.evalue = f"expected a refusal with `{rule}`, but it was refused with `{rules[0]}`: {f.evalue}"
    ctx.fail(f)


def _compiled_for_listing(ctx: Context, body: Body, what: str):
    outcome = ctx.session.process(body.source(ctx.session), compile=True, use_last_main=True)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return None, None
    if outcome.ir is None:
        raise DirectiveError(f"{what} shows the program `main` runs: write a `main` in the cell or run one first")
    wanted = {symbol(it.module, it.name) for it in outcome.defined}
    if outcome._commit is not None:
        wanted.add(symbol("", "main"))
    return outcome, wanted


def symbol(module: str, name: str) -> str:
    """The LLVM name codegen gives a cancho function (docs/ARCHITECTURE.md): `lexs_[module.]name`."""
    return "lexs_" + (module + "." if module else "") + name


def _filter_ir(text: str, wanted: set[str]) -> str:
    blocks, cur, keep = [], [], False
    for line in text.split("\n"):
        if line.startswith("define "):
            name = line.split("@", 1)[1].split("(", 1)[0].strip('"') if "@" in line else ""
            cur, keep = [line], name in wanted
            continue
        if cur:
            cur.append(line)
            if line == "}":
                if keep:
                    blocks.append("\n".join(cur))
                cur = []
    return "\n\n".join(blocks)


def _filter_asm(text: str, wanted: set[str]) -> str:
    blocks, cur, name = [], None, None
    for line in text.split("\n"):
        if cur is None and line.endswith(":") and not line.startswith((" ", "\t", ".")):
            label = line[:-1].strip('"')
            if label in wanted:
                cur, name = [line], label
                continue
        if cur is not None:
            if line.startswith(".Lfunc_end") or line.strip().startswith(".size"):
                blocks.append("\n".join(cur))
                cur = None
            else:
                cur.append(line)
    return "\n\n".join(blocks)


@directive("%%ir", "%%ir", "show the optimized (O2) LLVM IR of the cell's functions, as compiled into the "
           "program `main` runs (the session does not change)")
def _ir(ctx: Context, args: str, body: Body) -> None:
    outcome, wanted = _compiled_for_listing(ctx, body, "%%ir")
    if outcome is None:
        return
    full = native.optimized_ir(outcome.ir)
    shown = _filter_ir(full, wanted) or full
    ctx.display({"text/plain": shown.rstrip() + "\n"})


@directive("%%asm", "%%asm", "show the assembly of the cell's functions (the session does not change)")
def _asm(ctx: Context, args: str, body: Body) -> None:
    outcome, wanted = _compiled_for_listing(ctx, body, "%%asm")
    if outcome is None:
        return
    full = native.emit_asm(outcome.ir)
    shown = _filter_asm(full, wanted) or full
    ctx.display({"text/plain": shown.rstrip() + "\n"})


@directive("%%file", "%%file NAME.cho", "write the cell's text to NAME.cho (relative to the kernel's "
           "working directory; in safe mode it must be inside the notebook's directory) without running it")
def _file(ctx: Context, args: str, body: Body) -> None:
    words = split_args(args)
    if len(words) != 1:
        raise DirectiveError("%%file takes one file name")
    path = checked_path(words[0], ctx.settings, "%%file")
    text = body.text if body.text.endswith("\n") or not body.text else body.text + "\n"
    try:
        existed = path.exists()
        if existed and not path.is_file():
            raise DirectiveError(f"%%file: {words[0]} exists and is not a regular file")
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise DirectiveError(f"%%file: cannot write {path}: {e.strerror or e}") from None
    verb = "overwrote" if existed else "wrote"
    ctx.display({"text/plain": f"{verb} {path} ({len(text.encode('utf-8'))} bytes)"})


@directive("%load", "%load FILE.cho", "use FILE.cho (UTF-8, at most 8 MiB; in safe mode inside the "
           "notebook's directory) as the cell's text (diagnostics point into the file)")
def _load(ctx: Context, args: str, body: Body):
    words = split_args(args)
    if len(words) != 1:
        raise DirectiveError("%load takes one file name")
    if not body.blank:
        raise DirectiveError("%load replaces the cell's text: write it on a cell without other code")
    path = checked_path(words[0], ctx.settings, "%load")
    data = read_capped(path, LOAD_CAP, "%load", words[0])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DirectiveError(f"%load: {words[0]} is not UTF-8 text (byte {e.start} is not valid UTF-8)") from None
    return Body(text, 0, words[0])


@directive("%backend", "%backend [jit|exe]", "set the session's default backend (no argument: show it)")
def _backend(ctx: Context, args: str, body: Body) -> None:
    words = split_args(args)
    if not words:
        ctx.display({"text/plain": f"backend {ctx.settings.backend}"})
        return
    if len(words) != 1 or words[0] not in BACKENDS:
        raise DirectiveError(f"%backend takes one of {', '.join(BACKENDS)}")
    ctx.settings.backend = words[0]
    if body.blank:
        ctx.display({"text/plain": f"backend {words[0]}"})


@directive("%limits", "%limits [--timeout S] [--max-output N] [--memory N] [--cpu S] [--processes N]",
           "set the session's default run limits (`none` = unlimited, except output; no options: show them). "
           "Defaults: timeout 30 s, memory 4 GiB (the program's address space, set in the program only), "
           "CPU 600 s, 256 processes more than the user runs, output 1 MiB kept per stream (at most 256 MiB). "
           "Safe mode caps them at 600 s, 4 GiB, 600 s, 256 and 16 MiB")
def _limits(ctx: Context, args: str, body: Body) -> None:
    p = _Parser(prog="%limits", add_help=False)
    for flag in ("--timeout", "--max-output", "--memory", "--cpu", "--processes"):
        p.add_argument(flag)
    ns = p.parse_args(split_args(args))
    s = ctx.settings
    new = limits_of(ns, s)  # every value validated before any is set
    _check_caps(new, s)
    s.timeout, s.max_output, s.memory = new.timeout, new.max_output, new.memory
    s.cpu_seconds, s.processes = new.cpu_seconds, new.processes
    if body.blank:
        fmt = lambda v, unit="": "none" if v is None else f"{v:g}{unit}" if isinstance(v, float) else f"{v}{unit}"  # noqa: E731
        ctx.display({"text/plain": f"timeout {fmt(s.timeout, ' s')}, max output {fmt(s.max_output, ' bytes')} "
                                   f"per stream, memory {fmt(s.memory, ' bytes')}, cpu {fmt(s.cpu_seconds, ' s')}, "
                                   f"processes {fmt(s.processes)}"
                                   + (" (safe mode)" if s.safe else "")})


@directive("%who", "%who", "list the session's edition, imports and items")
def _who(ctx: Context, args: str, body: Body) -> None:
    text, table = P.who(ctx.session)
    ctx.display({"text/plain": text, "text/html": table})


@directive("%reset", "%reset", "forget every item, import and the edition (the backend and limits stay)")
def _reset(ctx: Context, args: str, body: Body) -> None:
    n = len(ctx.session.items)
    ctx.session.reset()
    if body.blank:
        ctx.display({"text/plain": f"session reset ({n} item{'s' if n != 1 else ''} forgotten)"})


@directive("%help", "%help", "show this list")
def _help(ctx: Context, args: str, body: Body) -> None:
    if args.strip():
        raise DirectiveError("%help takes no options")
    ctx.display({"text/plain": help_text(ctx.settings), "text/html": help_html(ctx.settings)})


@directive("%doc", "%doc NAME", "show what Shift+Tab shows for NAME (a builtin, a std function as `io.write_all`, "
           "a session item, a keyword) in the pager")
def _doc(ctx: Context, args: str, body: Body) -> None:
    from .completion import inspect

    words = split_args(args)
    if len(words) != 1:
        raise DirectiveError("%doc takes one name, e.g. `%doc split` or `%doc io.write_all`")
    found = inspect(words[0], len(words[0]), ctx.session)
    if not found.get("found"):
        raise DirectiveError(f"%doc: nothing is known as `{words[0]}` here")
    ctx.page(found["data"].get("text/plain", ""))


@directive("%clear", "%clear", "clear the cell's output area")
def _clear(ctx: Context, args: str, body: Body) -> None:
    ctx.clear()


# Directives defined in their own modules register themselves on import.
from . import bench as _bench  # noqa: E402,F401
from . import authority_view as _authority_view  # noqa: E402,F401

__all__ = ["REGISTRY", "Settings", "Body", "DirectiveError", "execute", "parse_header", "help_text",
           "known_names"]
