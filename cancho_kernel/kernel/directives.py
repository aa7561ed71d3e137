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

Every value a directive takes is validated, every file it reads is capped, and safe mode's
screen runs on every directive line: ``options.py`` (whose names this module re-exports).
``bench.py`` (``%%c``, ``%bench``, ``%%bench``,
``%programs``) and ``authority_view.py`` (``%authority``, ``%%authority``) register theirs the same
way; they are imported at the end of this module.
"""

from __future__ import annotations

import dataclasses
import html
import signal
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..compiler.backends.process import DEFAULT_RUN_LIMITS, SAFE_CAPS
from ..compiler.diagnostics import RULES
from ..compiler.source import SourceFile
from . import example_files
from . import presentation as P
from .options import (CPU, LOAD_CAP, MAX_OUTPUT, MEMORY, PROCESSES, STDIN_FILE_CAP, TIMEOUT,  # noqa: F401
                      Bound, DirectiveError, RunOptions, Settings, _check_caps, _mib, _Parser,
                      checked_path, limits_of, opened_stdout, parse_count, parse_run_options, parse_seconds,
                      parse_signal, parse_size, parse_stdout_target, read_capped, read_opened, safe_screen,
                      split_args, stdin_of, unescape, write_file)
from .listing import ListingOptions
from .runner import BACKENDS, RunRequest
from .memory import release_memory
from .session import Session


# -- the context a directive works in ----------------------------------------------------------------


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
             "(re-running a cell replaces its items). A program's output appears as it flushes it. "
             "Without --stdin/--stdin-file, a program that reads its standard input asks for it "
             "(an input box, where the frontend allows input): each line you submit reaches it with "
             "its newline; an empty line, or one holding only ^D, ends its input (end of file). "
             "Where input is not allowed (nbconvert, nbval) it reads end of file at once.")


def _help_entries() -> list[Directive]:
    return sorted(REGISTRY.values(), key=lambda d: (not d.is_cell, d.name))


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
    return (f"Safe mode is ON: {_sandbox_text(settings)}; paths for %load, %%file, "
            f"--stdin-file and file:PATH must be inside {settings.root} (%%file and file:PATH "
            f"not in a hidden dot-directory); {_confined_text(settings)}; "
            f"limits may be lowered, not "
            f"raised beyond timeout {c.timeout:g} s, memory {_mib(c.memory)}, CPU {c.cpu_seconds} s, "
            f"{c.processes} processes, output {_mib(c.max_output)}, files of {_mib(c.fsize)}.")


def _sandbox_text(settings: "Settings") -> str:
    """What bounds a program on this machine: the sandbox (and then the library runs), or the
    refusals that stand in for it (compiler/policy.py)."""
    from ..compiler.backends import sandbox

    probe = sandbox.probe()
    if probe.ok:
        return (f"every program, %%c's compiler and C program included, runs in a sandbox (its own "
                f"network with only its own loopback, its own processes, a read-only system, "
                f"{settings.root} its only writable directory with its dot-directories hidden, "
                f"a seccomp filter; docs/teaching.md), so `extern fn`, %%c, C flags and Exec work")
    return (f"there is NO sandbox here ({probe.reason}): programs that reach foreign code "
            f"(`extern fn`) or perform Exec are refused [unsafe-in-safe-mode]; %%c and "
            f"--cflags/--ldflags are refused")


def _confined_text(settings: "Settings") -> str:
    """What safe mode does about the paths a program computes, on this machine."""
    from ..compiler.backends import confine

    if confine.available():
        return (f"every program is also confined on disk (Landlock) to {settings.root} and, read "
                f"only, the system's libraries")
    return "programs are NOT confined on disk by Landlock here (this Linux has none)"


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


# -- what a cell's text does ------------------------------------------------------------------------


def default_cell(ctx: Context, body: Body) -> None:
    run_body(ctx, body, parse_run_options("", ctx.settings), use_last_main=False)


def run_body(ctx: Context, body: Body, opts: RunOptions, use_last_main: bool) -> None:
    """Check the cell with the session; commit it when accepted; run `main` if there is one."""
    outcome = ctx.session.process(body.source(ctx.session), compile=True, use_last_main=use_last_main,
                                  target=opts.compile_target)
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
    run_ir(ctx, outcome.ir, opts, kept, outcome.traps)


def run_ir(ctx: Context, ir: str, opts: RunOptions, kept=None, traps=None) -> None:
    """Run a compiled cell; a ``file:`` stdout is opened race-free for the run's length.
    ``traps``: the IR's trap sites, so a trap is shown where it is (compiler/trapsites.py)."""
    with opened_stdout(opts.target, ctx.settings) as target:
        _run_opened(ctx, ir, dataclasses.replace(opts, target=target), kept, traps)


def _run_opened(ctx: Context, ir: str, opts: RunOptions, kept=None, traps=None) -> None:
    if opts.compile_target.is_wasi:
        from .wasm_run import run_module

        outcome = run_module(ctx.runner, ir, opts)
    else:
        req = RunRequest(ir=ir, backend=opts.backend, target=opts.target, stdin=opts.stdin,
                         args=opts.args, limits=opts.limits)
        # The kernel's cell shows output while it runs, except where stdout is one picture
        # or table (`--display`), converted when the run has ended.
        live_view = getattr(ctx, "live_view", None)
        view = live_view(opts.stdin_given) if live_view is not None and not opts.display else None
        outcome = ctx.runner.run(req, view) if view is not None else ctx.runner.run(req)
    result, failed = outcome.result, outcome.failure
    streamed = getattr(outcome, "streamed", False)
    shown = None
    if result is not None:
        try:
            shown = _displayed(result, opts) if opts.display and failed is None else None
        except DirectiveError:
            if result.stderr and not streamed:
                ctx.stream("stderr", result.stderr.decode("utf-8", errors="replace"))
            raise
        if result.stdout and shown is None and not streamed:
            ctx.stream("stdout", result.stdout.decode("utf-8", errors="replace"))
        if result.stderr and not streamed:
            ctx.stream("stderr", result.stderr.decode("utf-8", errors="replace"))
        if shown is not None:
            ctx.display(shown, {"cancho": {"display": opts.display, "bytes": len(result.stdout)}})
    if failed is not None:
        if outcome.interrupted:
            ctx.fail(P.simple_failure("KeyboardInterrupt", "interrupted before the program started"))
        else:
            ctx.fail(P.simple_failure(failed.kind.value, failed.message))
        return
    assert result is not None
    bounded = getattr(ctx.runner, "bounded", None)  # the limits the run had (safe mode's caps)
    limits = bounded(opts.limits) if bounded is not None else opts.limits
    site = traps.get(result.trap_site) if traps is not None and result.signal == signal.SIGILL else None
    failure = P.judge(result, opts.target, opts.expect_status, opts.expect_signal, limits, site)
    meta = P.run_metadata(result, opts.compile_target.name if opts.compile_target.is_wasi else opts.backend,
                          opts.target)
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


def _displayed(result, opts: RunOptions) -> dict | None:
    """`--display`: the bundle for what the program wrote, when it ended as expected and its
    output was kept whole; else None (its bytes are then shown as text). Output that is not the
    kind it claims raises DirectiveError (the cell fails, saying why)."""
    from .program_display import bundle

    if result.signal is not None or result.timed_out or (
            result.exit_status != (opts.expect_status or 0)):
        return None
    if result.stdout_truncated:
        raise DirectiveError(f"--display {opts.display}: the output was cut at the --max-output cap "
                             f"({result.stdout_total} bytes written), so it is not shown as {opts.display}")
    return bundle(opts.display, result.stdout)


# -- the directives -----------------------------------------------------------------------------------


@directive("%%run", "%%run [--backend jit|exe] [--stdout pipe|/dev/full|/dev/null|file:PATH|closed|broken-pipe[:N]] "
           "[--stdin TEXT | --stdin-file PATH] [--args A B ...] [--timeout S] [--max-output N] [--memory N] "
           "[--cpu S] [--processes N] [--expect-status N | --expect-signal SIG | --expect-trap] [--name NAME] "
           "[--display image/png|image/svg+xml|text/html|text/csv|ppm] [--target wasm32-wasip1] [-- ARGS ...]",
           "compile the cell with the session and run it with these options; without a `main` in the "
           "cell, the last `main` runs again; --name keeps the program for %bench. Limits apply to the "
           "program only (see %limits); --stdin-file reads at most 64 MiB; arguments after `--` are "
           "the program's too, for those that start with `-` (`-- -d, -f2`); --display shows what the program "
           "writes to stdout as that kind of output (CSV as a table, a PPM image as PNG); --target "
           "wasm32-wasip1 builds a WebAssembly module and runs it with wasmtime (a trap is status 134)")
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


LISTING_USAGE = "[--fn NAME]... [-O0|-O2] [--annotate]"


def _asked(ir: str, opts: ListingOptions) -> set[str]:
    """The `--fn` names as symbols, each checked against the program's own functions."""
    from ..compiler.backends import native
    from .listing import matches, symbol_of

    stems = {symbol_of(n) for n in opts.functions}
    defined = [f.name for f in native.parse(ir).functions if not f.is_declaration]
    for n in opts.functions:
        if not any(matches(d, {symbol_of(n)}) for d in defined):
            shown = sorted({d[len("lexs_"):].split("[")[0] for d in defined if d.startswith("lexs_")})
            raise DirectiveError(f"--fn {n}: the program `main` runs has no function `{n}` "
                                 f"(it has {', '.join(shown)})")
    return stems


def _listing(ctx: Context, body: Body, what: str, args: str) -> None:
    """`%%ir`/`%%asm` with options (listing.py); without any, the listing as it always was."""
    from . import listing

    opts = listing.parse_listing(what, args)
    if opts.diff is not None:
        _asm_diff(ctx, body, opts)
        return
    outcome, wanted = _compiled_for_listing(ctx, body, what)
    if outcome is None:
        return
    if opts.plain:
        from ..compiler.backends import native  # libLLVM's passes: only for a cell that asks

        full = native.optimized_ir(outcome.ir) if what == "%%ir" else native.emit_asm(outcome.ir)
        shown = (_filter_ir if what == "%%ir" else _filter_asm)(full, wanted) or full
        ctx.display({"text/plain": shown.rstrip() + "\n"})
        return
    stems = _asked(outcome.ir, opts) if opts.functions else wanted
    mod = listing.module_for(outcome.ir, opts.opt, stems)
    if opts.annotate:
        blocks = listing.annotated(what, outcome.program, opts, stems)
    elif what == "%%ir":
        blocks = listing.ir_functions(mod, stems)
    else:
        blocks = [b for b in listing.asm_functions(listing.assembly(mod, opts.opt, opts.intel))
                  if listing.matches(b.name, stems)]
    text = "\n\n".join(b.text for b in blocks) or f"none of {', '.join(sorted(stems))} is in the program"
    ctx.display({"text/plain": text.rstrip() + "\n"},
                {"cancho": {"functions": [b.name for b in blocks], "opt": opts.opt, "intel": opts.intel}})


def _diff_side(ctx: Context, name: str, opts, cell) -> tuple[str, list[str]]:
    """One side of a diff: a named program's whole listing, or one function of the cell."""
    from . import listing

    if cell is None:
        prog = ctx.session.programs.resolve(name)
        assert prog is not None and prog.ir is not None
        mod = listing.module_for(prog.ir, opts.opt, set())
        blocks = listing.asm_functions(listing.assembly(mod, opts.opt, opts.intel))
        return name, [line for b in blocks for line in [f"{b.name}:", *listing.instructions(b.text)[1:]]]
    stem = listing.symbol_of(name)
    blocks = [b for b in listing.asm_functions(cell) if listing.matches(b.name, {stem})]
    return name, [line for b in blocks for line in listing.instructions(b.text)]


def _asm_diff(ctx: Context, body: Body, opts) -> None:
    """`%%asm --diff A B`: two programs kept by `%%run --name`, else two functions of the cell."""
    from . import listing

    a, b = opts.diff
    programs = [ctx.session.programs.resolve(n) for n in (a, b)]
    if all(p is not None and p.kind == "cancho" and p.ir is not None for p in programs) and body.blank:
        left, right = _diff_side(ctx, a, opts, None), _diff_side(ctx, b, opts, None)
    else:
        outcome, _ = _compiled_for_listing(ctx, body, "%%asm --diff")
        if outcome is None:
            return
        stems = _asked(outcome.ir, dataclasses.replace(opts, functions=(a, b)))
        text = listing.assembly(listing.module_for(outcome.ir, opts.opt, stems), opts.opt, opts.intel)
        left, right = _diff_side(ctx, a, opts, text), _diff_side(ctx, b, opts, text)
    plain, doc = listing.side_by_side(left, right)
    ctx.display({"text/plain": plain + "\n", "text/html": doc},
                {"cancho": {"diff": [a, b], "lines": [len(left[1]), len(right[1])]}})


@directive("%%ir", "%%ir " + LISTING_USAGE,
           "show the optimized (O2) LLVM IR of the cell's functions, as compiled into the program `main` "
           "runs (the session does not change); --fn NAME shows that function (kept for the listing even "
           "where O2 would inline it into every caller), -O0 the IR before optimisation, --annotate each block of "
           "instructions under the cell line it came from")
def _ir(ctx: Context, args: str, body: Body) -> None:
    _listing(ctx, body, "%%ir", args)


@directive("%%asm", "%%asm " + LISTING_USAGE + " [--intel] [--diff A B]",
           "show the assembly of the cell's functions (the session does not change); options as %%ir's, "
           "--intel in Intel syntax; --diff A B side by side: two programs kept with `%%run --name` "
           "(an empty cell), or two functions of the cell")
def _asm(ctx: Context, args: str, body: Body) -> None:
    _listing(ctx, body, "%%asm", args)


@directive("%%file", "%%file NAME.cho", "write the cell's text to NAME.cho (a plain file name in the notebook's "
           "directory; outside safe mode any path) without running it, replacing the file (mode 0644)")
def _file(ctx: Context, args: str, body: Body) -> None:
    words = split_args(args)
    if len(words) != 1:
        raise DirectiveError("%%file takes one file name")
    text = body.text if body.text.endswith("\n") or not body.text else body.text + "\n"
    data = text.encode("utf-8")
    existed = write_file(words[0], data, ctx.settings)
    verb = "overwrote" if existed else "wrote"
    ctx.display({"text/plain": f"{verb} {words[0]} ({len(data)} bytes)"})


@directive("%load", "%load FILE.cho | %load --example NAME.cho",
           "use FILE.cho (UTF-8, at most 8 MiB; in safe mode inside the notebook's directory) as the cell's "
           "text (diagnostics point into the file); --example NAME.cho takes one of the example programs the "
           "package carries (e.g. base64/base64.cho), so the notebook runs wherever it is copied")
def _load(ctx: Context, args: str, body: Body):
    words = split_args(args)
    example = words[:1] == ["--example"]
    if example:
        words = words[1:]
    if len(words) != 1:
        raise DirectiveError("%load --example takes one example name" if example else "%load takes one file name")
    if not body.blank:
        raise DirectiveError("%load replaces the cell's text: write it on a cell without other code")
    if example:
        try:
            path = example_files.find(words[0]).path
        except example_files.ExampleError as e:
            raise DirectiveError(f"%load --example: {e}") from None
        data = read_opened(str(path), Settings(), LOAD_CAP, "%load --example")  # the package's own file
    else:
        data = read_opened(words[0], ctx.settings, LOAD_CAP, "%load")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DirectiveError(f"%load: {words[0]} is not UTF-8 text (byte {e.start} is not valid UTF-8)") from None
    return Body(text, 0, f"examples/{words[0]}" if example else words[0])


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
    release_memory()
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
from . import tools_view as _tools_view  # noqa: E402,F401  (%%fmt, %layout, %ids)
from . import testcell as _testcell  # noqa: E402,F401

__all__ = ["REGISTRY", "Settings", "Body", "DirectiveError", "execute", "parse_header", "help_text",
           "known_names"]
