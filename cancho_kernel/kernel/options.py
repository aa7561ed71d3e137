"""What a directive's options may say, checked before anything runs: numbers, sizes, durations,
signals, stdin text, stdout targets and paths, the session's settings, and safe mode's screen.

Every value is validated (numbers finite and in range, sizes parsed strictly, paths checked)
and every file a directive reads is read up to a documented cap (:data:`STDIN_FILE_CAP`,
:data:`LOAD_CAP`), so no cell can make the kernel read without bound. In safe mode
(:attr:`Settings.safe`) `%%c` and C flags are refused, paths must stay inside the notebook's
directory (:attr:`Settings.root`, symlinks resolved), and run limits may not exceed
:data:`process.SAFE_CAPS`. Split out of ``directives.py``, which re-exports these names.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import secrets
import shlex
import signal as _signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..compiler.backends.process import (DEFAULT_RUN_LIMITS, SAFE_CAPS, RunLimits, StdoutKind,
                                        StdoutTarget)
from ..compiler.run import BACKENDS
from ..compiler.target import HOST, Target
from . import beneath


class DirectiveError(Exception):
    """A directive could not be understood (unknown name, bad option)."""


# -- the session's settings ----------------------------------------------------------------------


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
    fsize: int | None = DEFAULT_RUN_LIMITS.fsize
    bench_runs: int | None = field(default_factory=_bench_runs_from_env)
    safe: bool = False
    root: Path = field(default_factory=lambda: Path.cwd().resolve())

    def run_limits(self) -> RunLimits:
        """The session's default limits of one run."""
        return RunLimits(timeout=self.timeout, max_output=self.max_output, memory=self.memory,
                         cpu_seconds=self.cpu_seconds, processes=self.processes, fsize=self.fsize)


def _mib(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20} MiB"


# -- option parsing ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that reports to the cell instead of exiting, and takes options only as written
    in full (an abbreviation could slip past safe mode's screen of option names)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # never exit the kernel
        hint = ""
        if message.startswith("unrecognized arguments") and "--args" in self._arg_names:
            hint = ("; the program's own arguments that start with `-` go after `--` "
                    f"(`{self.prog} --args x -- -d, -f2`)")
        raise DirectiveError(f"{self.prog}: {message}{hint}")

    @property
    def _arg_names(self) -> set[str]:
        return {s for a in self._actions for s in a.option_strings}

    def parse_directive(self, text: str) -> argparse.Namespace:
        """Parse a directive's options; everything after a `--` belongs to the program and is
        appended to its `--args` (so `cut -d, -f2` can be written `-- -d, -f2`)."""
        tokens = split_args(text)
        rest: list[str] = []
        if "--" in tokens:
            at = tokens.index("--")
            tokens, rest = tokens[:at], tokens[at + 1:]
            if "--args" not in self._arg_names:
                raise DirectiveError(f"{self.prog}: takes no program arguments after `--`")
        ns = self.parse_args(tokens)
        if rest:
            ns.args = list(ns.args or []) + rest
        return ns

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

# Refused in safe mode only where the sandbox is unavailable (compiler/policy.py): with it, the
# compiler and the C program run inside it like any other program.
SAFE_REFUSED_DIRECTIVES = {"%%c": "%%c compiles and runs C, and this machine has no sandbox to "
                                  "bound it"}
SAFE_REFUSED_OPTIONS = {"--cflags": "C compiler flags can run any program (e.g. -wrapper), and "
                                    "this machine has no sandbox to bound it",
                        "--ldflags": "linker flags can run any program and link any library, "
                                     "and this machine has no sandbox to bound it"}


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
    the notebook's directory, limits above the caps. C (``%%c``, C flags) is refused only where
    the sandbox is unavailable."""
    from ..compiler.policy import sandboxed

    foreign_refused = not sandboxed()
    if foreign_refused and name in SAFE_REFUSED_DIRECTIVES:
        raise DirectiveError(f"{name} is refused in safe mode: {SAFE_REFUSED_DIRECTIVES[name]}")
    words = split_args(args)
    for flag, why in SAFE_REFUSED_OPTIONS.items() if foreign_refused else ():
        if _option_values(words, flag) or flag in words:
            raise DirectiveError(f"{flag} is refused in safe mode: {why}")
    for path in _option_values(words, "--stdin-file"):
        checked_path(path, settings, "--stdin-file")
    for target in _option_values(words, "--stdout"):
        if target.startswith("file:"):
            _not_hidden(checked_path(target[len("file:"):], settings, "--stdout file:"),
                        settings, "--stdout file:", target[len("file:"):])
    if name == "%%file" and len(words) == 1:
        _not_hidden(checked_path(words[0], settings, "%%file"), settings, "%%file", words[0])
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


def _not_hidden(full: Path, settings: Settings, what: str, text: str) -> None:
    """The kernel writes unconfined: in safe mode never beneath a dot-entry of the notebook's
    directory (on a hub, `$HOME`: `.local/…/*.pth`, `.jupyter/…config.py`, the cache's
    launcher all run later; the sandbox hides them from programs, this from the kernel)."""
    rel = full.relative_to(settings.root) if full != settings.root else Path()
    if any(part.startswith(".") for part in rel.parts):
        raise DirectiveError(f"{what} `{text}` is refused in safe mode: it names a hidden "
                             "(dot) file or directory, which other programs read or run")


def checked_path(text: str, settings: Settings, what: str) -> Path:
    """The path a directive names, resolved against the notebook's directory: an early refusal
    only (safe mode's screen), never what is opened — :func:`open_path` checks and opens in one
    step. In safe mode it must stay inside that directory once every symlink is resolved
    (``..``, an absolute path, a link pointing out, ``/proc/self/...`` are all refused)."""
    if not text:
        raise DirectiveError(f"{what} needs a path")
    if "\0" in text:
        raise DirectiveError(f"{what}: a path cannot contain a NUL character")
    path = Path(os.path.expanduser(text))
    if not settings.safe:
        return path
    try:  # a name changing under us (a link swapped in) makes realpath fail: a refusal, not a crash
        full = (path if path.is_absolute() else settings.root / path).resolve()
    except (OSError, RuntimeError) as e:
        raise DirectiveError(f"{what} `{text}` is refused in safe mode: it cannot be resolved "
                             f"({getattr(e, 'strerror', None) or e})") from None
    root = settings.root
    if full != root and root not in full.parents:
        raise DirectiveError(f"{what} `{text}` is refused in safe mode: it is outside the notebook's "
                             f"directory {root}")
    return full


def _beneath_text(text: str, settings: Settings, what: str) -> tuple[beneath.Beneath, str]:
    """Where a directive's path is opened from, and the path relative to it: in safe mode the
    notebook's directory (opened once) and the path inside it (an absolute path must name
    something in it); otherwise ``/`` and the path as it resolves now (any path, but a symlink
    swapped in after this point is not followed)."""
    if not text:
        raise DirectiveError(f"{what} needs a path")
    if "\0" in text:
        raise DirectiveError(f"{what}: a path cannot contain a NUL character")
    path = os.path.expanduser(text)
    if not settings.safe:
        return beneath.directory("/"), os.path.realpath(path).lstrip("/") or "."
    root = str(settings.root)
    if os.path.isabs(path):
        norm = os.path.normpath(path)
        if norm != root and not norm.startswith(root.rstrip("/") + "/"):
            raise DirectiveError(f"{what} `{text}` is refused in safe mode: it is outside the notebook's "
                                 f"directory {root}")
        path = os.path.relpath(norm, root)
    return beneath.directory(root), path


def open_path(text: str, settings: Settings, what: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor for the path a directive names, the check and the open one step
    (``beneath.py``): in safe mode nothing outside the notebook's directory and no symlink on
    the way. The caller owns (closes) the descriptor."""
    base, rel = _beneath_text(text, settings, what)
    try:
        return beneath.open_beneath(base, rel, flags, mode)
    except beneath.PathRefused as e:
        why = (f"it is outside the notebook's directory {settings.root}" if e.reason is beneath.Refusal.LEAVES
               else "a symbolic link is on its way, and no link is followed (one could lead outside the "
               f"notebook's directory {settings.root})")
        raise DirectiveError(f"{what} `{text}` is refused{' in safe mode' if settings.safe else ''}: "
                             f"{why}") from None
    except OSError as e:
        raise DirectiveError(f"{what}: cannot open `{text}`: {e.strerror or e}") from None


FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.cho")


def write_file(text: str, data: bytes, settings: Settings) -> bool:
    """``%%file``: ``data`` written to the file a cell names, replacing it whole (a new file of
    mode 0644 renamed over it: never an old file's mode, never written through a link); whether
    it existed. In safe mode only a plain ``NAME.cho`` in the notebook's directory (no dotfile,
    no directory, no other suffix: nothing there that runs later); otherwise any path."""
    if settings.safe:
        if not FILE_NAME.fullmatch(text):
            raise DirectiveError(f"%%file `{text}` is refused in safe mode: it writes only a plain file name "
                                 "ending in .cho in the notebook's directory (letters, digits, _ - ., "
                                 "not starting with a dot), e.g. `%%file lib.cho`")
        return _replace(beneath.directory(str(settings.root)), text, data)
    _, rel = _beneath_text(text, settings, "%%file")
    folder, name = os.path.split(rel)
    fd = open_path("/" + folder, settings, "%%file", os.O_PATH | os.O_DIRECTORY)
    try:
        return _replace(beneath.Beneath(fd, "/" + folder), name, data, "")
    finally:
        os.close(fd)


def _replace(parent: beneath.Beneath, name: str, data: bytes, where: str = " in safe mode") -> bool:
    """Write ``data`` to a fresh file beside ``name`` (O_EXCL, race-free) and rename it over
    ``name``; refuse a directory, a link or a device there."""
    try:
        st = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise DirectiveError(f"%%file: cannot write {name}: {e.strerror or e}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise DirectiveError(f"%%file `{name}` is refused{where}: it is a symbolic link (no link is "
                             "followed or replaced)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise DirectiveError(f"%%file: {name} exists and is not a regular file")
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = beneath.open_beneath(parent, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.fchmod(fd, 0o644)  # whatever the umask: readable, never executable
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
    except (OSError, beneath.PathRefused) as e:
        try:
            os.unlink(tmp, dir_fd=parent.fd)
        except OSError:
            pass
        raise DirectiveError(f"%%file: cannot write {name}: {getattr(e, 'strerror', None) or e}") from None
    return st is not None


def read_opened(text: str, settings: Settings, cap: int, what: str) -> bytes:
    """At most ``cap`` bytes of the file a directive names, opened race-free (:func:`open_path`)
    without blocking; more is a directive error, whatever the file is (a regular file is judged
    by its size first; a device such as /dev/zero is read only up to the cap). A directory, a
    FIFO or a socket (which could block the kernel) is refused."""
    fd = open_path(text, settings, what, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        return read_capped(fd, cap, what, text)
    finally:
        os.close(fd)


def read_capped(fd: int, cap: int, what: str, shown: str) -> bytes:
    """At most ``cap`` bytes from an open descriptor, judged by what it is (``fstat``)."""
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DirectiveError(f"{what}: `{shown}` is a directory")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise DirectiveError(f"{what}: `{shown}` is not a regular file")
        if stat.S_ISREG(st.st_mode) and st.st_size > cap:
            raise DirectiveError(f"{what}: `{shown}` is {st.st_size} bytes, more than the {_mib(cap)} "
                                 f"the kernel reads")
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
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
    :data:`STDIN_FILE_CAP` bytes, through a race-free open), else default. With ``settings``,
    the path is held to safe mode when it is on; without, any path (still no symlink swapped
    in after it resolved)."""
    text, path = getattr(ns, "stdin", None), getattr(ns, "stdin_file", None)
    if text is not None and path is not None:
        raise DirectiveError("give --stdin or --stdin-file, not both")
    if path is not None:
        return read_opened(path, settings if settings is not None else Settings(), STDIN_FILE_CAP,
                           "--stdin-file")
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
    stdin_given: bool = True  # `--stdin`/`--stdin-file` given (else the user's, where allowed)
    display: str | None = None  # `--display KIND`: stdout shown as that kind (program_display.py)
    compile_target: Target = HOST  # `--target wasm32-wasip1`: built as a WASI module (wasm_run.py)


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
    p.add_argument("--display", default=None)
    p.add_argument("--target", dest="compile_target", default=None)
    return p


def _display_of(ns, target: StdoutTarget) -> str | None:
    """`--display KIND`: one of the kinds, on an ordinary pipe (what is shown is what was kept)."""
    from .program_display import KINDS

    if ns.display is None:
        return None
    if ns.display not in KINDS:
        raise DirectiveError(f"--display: `{ns.display}` is not a kind shown here; use one of {', '.join(KINDS)}")
    if target.kind is not StdoutKind.PIPE:
        raise DirectiveError("--display shows what the program writes to stdout: it takes the default "
                             "--stdout pipe")
    return ns.display


def _compile_target_of(ns, settings: Settings) -> Target:
    """`--target`: the host (default) or `wasm32-wasip1`, which safe mode refuses and which
    runs on neither host backend nor under a bench name."""
    if ns.compile_target is None:
        return HOST
    from ..compiler.backends import native
    from ..compiler.target import UnknownTarget, parse_target

    try:
        target = parse_target(ns.compile_target, native.host_triple())
    except UnknownTarget as e:
        raise DirectiveError(f"--target: {e}") from None
    if not target.is_wasi:
        return HOST
    if settings.safe:
        raise DirectiveError(f"refused in safe mode: --target {target.name} (its limits and confinement "
                             "are applied to host programs only)")
    if ns.backend is not None:
        raise DirectiveError(f"--backend chooses how the host runs a program; --target {target.name} "
                             "builds a WebAssembly module, which wasmtime runs")
    if ns.name is not None:
        raise DirectiveError(f"--name keeps a host program for %bench; not with --target {target.name}")
    return target


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
        checked_path(target.path, settings, "--stdout file:")  # refused early; opened by opened_stdout
    return target


@contextmanager
def opened_stdout(target: StdoutTarget, settings: Settings) -> Iterator[StdoutTarget]:
    """The target a run is given: a ``file:PATH`` opened here, race-free (:func:`open_path`),
    as a descriptor the run writes to (never a path opened again later); closed afterwards.
    A FIFO (which would block the kernel) or a directory is refused; a regular file is emptied."""
    if target.kind is not StdoutKind.FILE or target.fd is not None:
        yield target
        return
    assert target.path is not None
    fd = open_path(target.path, settings, "--stdout file:",
                   os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY, 0o644)
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise DirectiveError(f"--stdout file: `{target.path}` is not a regular file")
        os.set_blocking(fd, True)
        if stat.S_ISREG(st.st_mode):
            os.ftruncate(fd, 0)
        yield dataclasses.replace(target, fd=fd)
    finally:
        os.close(fd)


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
    ns = _run_parser().parse_directive(args)
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
    compile_target = _compile_target_of(ns, settings)
    if compile_target.is_wasi and expect_signal is not None:
        if expect_signal != int(_signal.SIGILL):
            raise DirectiveError("a WebAssembly module is not ended by signals: --expect-signal does not apply")
        expect_status, expect_signal = 134, None  # the WASI runtime's status for a trap (docs/cli.md)
    return RunOptions(ns.backend or settings.backend, target,
                      stdin_of(ns, settings=settings), list(ns.args), limits,
                      expect_status, expect_signal, ns.name,
                      ns.stdin is not None or ns.stdin_file is not None,
                      _display_of(ns, target), compile_target)
