"""Timings in the notebook: ``%%c``, named programs, ``%bench`` / ``%%bench`` and ``%programs``.

What a bench does (kernel.md §2.3–2.4):

* every item is built once (build times are reported apart: ``compile``, ``link`` and, for jit
  runs, the MCJIT time of each run, which is not part of its wall time);
* one warm-up round (``--warmup``), then ``--runs`` rounds (default 9) interleaved A B A B …, so
  a slow spell of a shared machine hits every item alike;
* each run goes to the chosen stdout target (default ``/dev/null``) with the stdin and arguments
  ``%%run`` takes; wall, user and sys time and peak RSS come from the child's rusage;
* medians with min–max; each item's ratio to the first item is computed round by round (run i of
  B divided by run i of A) and summarised by its median and min–max;
* output: the PNG plot as one ``display_data``, then the HTML table as the ``execute_result``,
  each with a ``text/plain`` line without any timing figure; the raw numbers are in the table's
  ``metadata["cancho"]["bench"]``;
* progress: an HTML progress bar updated through its ``display_id``, left as one text line when
  the bench ends. An interrupt cancels the running program, the cell ends with a
  ``KeyboardInterrupt`` error and nothing else changes.

A run that does not end as expected (exit status 0 unless ``--expect-status N``) stops the bench
with a ``bench-run-failed`` error: a time is only worth showing for a program that worked.
"""

from __future__ import annotations

import dataclasses
import html
import statistics
import time
import uuid
from dataclasses import dataclass, field

from ..compiler.backends.process import RunLimits, RunResult, StdoutKind, StdoutTarget
from . import claims as C
from . import plots
from . import presentation as P
from .claims import Claim, ClaimError
from .cbaseline import CFailure, compile_baseline, split_flags
from .directives import Body, Context, directive
from .options import DirectiveError, RunOptions, _Parser, parse_seconds, stdin_of
from .named import Program, valid_name
from ..compiler.run import BACKENDS, Backend, RunFailed, build, interruptible

SCHEMA = "cancho-kernel-bench/1"
DEFAULT_RUNS = 9
BENCH_TARGETS = ("/dev/null", "pipe", "/dev/full", "closed")


class BenchFailed(Exception):
    def __init__(self, failure: P.Failure) -> None:
        super().__init__(failure.evalue)
        self.failure = failure


class BenchInterrupted(Exception):
    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"interrupted after {done} of {total} runs")
        self.done, self.total = done, total


# -- building the cancho side ---------------------------------------------------------------------------


def cancho_program(ctx: Context, name: str, ir: str, backend: str, timings: dict, origin: str | None,
                   stdin: bytes = b"", args: list[str] | None = None, source: str | None = None) -> Program:
    """A runnable program from a compiled cell: jit keeps the IR; exe builds a binary in the store
    (never from the build cache: its compile and link times are part of what a bench reports)."""
    check = sum(timings.get(k, 0.0) for k in ("check", "lower"))
    prog = Program(name=name, kind="cancho", backend=backend, ir=ir, stdin=stdin, args=list(args or []),
                   origin=origin, source=source, compile_seconds=check)
    if backend == Backend.EXE:
        try:
            built = build(ir, Backend.EXE, ctx.session.programs.new_path(name))
        except RunFailed as e:
            raise BenchFailed(P.simple_failure(e.kind.value, e.message)) from None
        prog.path = built.path
        prog.compile_seconds = check + built.object_seconds
        prog.link_seconds = built.link_seconds
    return prog


def keep_named(ctx: Context, name: str, outcome, opts: RunOptions, origin: str | None) -> Program:
    """``%%run --name NAME``: keep the cell's compiled program under NAME."""
    if not valid_name(name):
        raise DirectiveError(f"`{name}` is not a program name (letters, digits, _ . -; not starting with a digit)")
    prog = cancho_program(ctx, name, outcome.ir, opts.backend, outcome.timings, origin, opts.stdin, opts.args,
                          outcome.source.text)
    ctx.session.programs.put(prog)
    return prog


# -- targets and options ----------------------------------------------------------------------------------


def bench_target(name: str) -> tuple[StdoutTarget, str | None]:
    """(target, how) for a bench's stdout. ``/dev/null`` is the real device when process.py offers
    it; until then it is a pipe the kernel drains and discards (``how`` says so)."""
    if name == "/dev/null":
        if any(k.value == "/dev/null" for k in StdoutKind):
            return StdoutTarget.parse("/dev/null"), None
        return StdoutTarget.pipe(), "a pipe the kernel drains and discards"
    if name == "pipe":
        return StdoutTarget.pipe(), "a pipe the kernel drains and discards"
    try:
        target = StdoutTarget.parse(name)
    except ValueError:
        target = None
    if target is None or target.kind in (StdoutKind.INHERIT, StdoutKind.BROKEN_PIPE):
        raise DirectiveError(f"bench: unknown stdout target `{name}`: use {', '.join(BENCH_TARGETS)}")
    return target, None


@dataclass
class BenchOptions:
    names: list[str]
    runs: int
    warmup: int
    stdout: str
    stdin: bytes | None
    args: list[str] | None
    timeout: float | None
    expect_status: int
    backends: tuple[str, ...] = ()
    name: str | None = None
    interactive: bool = False
    ranges: list[tuple[str, int, int, int]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    limits: RunLimits = field(default_factory=RunLimits)   # the session's, with this bench's timeout


def _bench_parser(prog: str, cell: bool) -> _Parser:
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("names", nargs="*")
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--stdout", default="/dev/null")
    p.add_argument("--stdin", default=None)
    p.add_argument("--stdin-file", default=None)
    p.add_argument("--args", nargs="*", default=None)
    p.add_argument("--timeout", default=None)
    p.add_argument("--expect-status", type=int, default=0)
    p.add_argument("--claim", action="append", default=[])
    if cell:
        p.add_argument("--backend", choices=(*BACKENDS, "both"), default=None)
        p.add_argument("--name", default=None)
        p.add_argument("--interactive", action="store_true")
        p.add_argument("--arg", action="append", default=[])
    return p


def parse_range(text: str) -> tuple[str, int, int, int]:
    """``SIZE=64:4096[:STEP]``."""
    name, eq, rng = text.partition("=")
    parts = rng.split(":")
    if not eq or not name.isidentifier() or len(parts) not in (2, 3):
        raise DirectiveError(f"--arg `{text}`: write NAME=LOW:HIGH or NAME=LOW:HIGH:STEP, e.g. SIZE=64:4096")
    try:
        lo, hi = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) == 3 else max(1, (hi - lo) // 64)
    except ValueError:
        raise DirectiveError(f"--arg `{text}`: LOW, HIGH and STEP are integers") from None
    if lo > hi or step < 1:
        raise DirectiveError(f"--arg `{text}`: LOW must not exceed HIGH and STEP must be positive")
    return name, lo, hi, step


def parse_bench_options(args: str, ctx: Context, cell: bool) -> BenchOptions:
    prog = "%%bench" if cell else "%bench"
    ns = _bench_parser(prog, cell).parse_directive(args)
    interactive = cell and ns.interactive
    runs = ns.runs if ns.runs is not None else (3 if interactive else DEFAULT_RUNS)
    if ctx.settings.bench_runs is not None and not interactive:
        runs = ctx.settings.bench_runs  # the full mode (CANCHO_BENCH_RUNS) overrides a cell's quick count
    if runs < 1:
        raise DirectiveError(f"{prog}: --runs must be at least 1")
    if ns.warmup < 0:
        raise DirectiveError(f"{prog}: --warmup must not be negative")
    bench_target(ns.stdout)  # refuse a bad target before building anything
    try:
        claims = [C.parse_claim(t) for t in ns.claim]
    except ClaimError as e:
        raise DirectiveError(str(e)) from None
    opts = BenchOptions(names=list(ns.names), runs=runs, warmup=ns.warmup, stdout=ns.stdout,
                        stdin=stdin_of(ns, None),
                        args=list(ns.args) if ns.args is not None else None,
                        timeout=parse_seconds(ns.timeout) if ns.timeout is not None else ctx.settings.timeout,
                        expect_status=ns.expect_status, claims=claims)
    opts.limits = dataclasses.replace(ctx.settings.run_limits(), timeout=opts.timeout, max_output=0)
    if cell:
        b = ns.backend or ctx.settings.backend
        opts.backends = BACKENDS if b == "both" else (b,)
        opts.name = ns.name
        if ns.name is not None and not valid_name(ns.name):
            raise DirectiveError(f"%%bench: `{ns.name}` is not a program name")
        opts.interactive = interactive
        opts.ranges = [parse_range(a) for a in ns.arg]
        if opts.ranges and not interactive:
            raise DirectiveError("%%bench: --arg goes with --interactive")
        if interactive and not opts.ranges:
            raise DirectiveError("%%bench --interactive needs at least one --arg NAME=LOW:HIGH")
    return opts


# -- measuring ---------------------------------------------------------------------------------------------


@dataclass
class Item:
    program: Program
    label: str
    stdin: bytes
    args: list[str]
    results: list[RunResult] = field(default_factory=list)


def make_items(programs: list[tuple[Program, str]], opts: BenchOptions,
               values: dict[str, int] | None = None) -> list[Item]:
    items = []
    for prog, label in programs:
        args = opts.args if opts.args is not None else prog.args
        if values:
            args = [substitute(a, values) for a in args]
        items.append(Item(prog, label, opts.stdin if opts.stdin is not None else prog.stdin, list(args)))
    return items


def substitute(text: str, values: dict[str, int]) -> str:
    for k, v in values.items():
        text = text.replace("{" + k + "}", str(v))
    return text


def _judge_run(item: Item, result: RunResult, expect_status: int) -> P.Failure | None:
    how = result.describe()
    if result.timed_out:
        return P.simple_failure("bench-run-failed", f"{item.label}: {how} (raise it with --timeout)")
    if result.signal is not None or result.exit_status != expect_status:
        return P.simple_failure("bench-run-failed", f"{item.label}: {how}; a bench needs runs that end with "
                                                    f"status {expect_status} (--expect-status N)")
    return None


def measure(runner, items: list[Item], opts: BenchOptions, progress=None) -> None:
    """Warm-up, then interleaved timed rounds; results land in ``item.results``.

    Raises :class:`BenchFailed` or :class:`BenchInterrupted`."""
    target, _how = bench_target(opts.stdout)
    limits = opts.limits
    total = (opts.warmup + opts.runs) * len(items)
    done = 0
    for rnd in range(opts.warmup + opts.runs):
        for item in items:
            def once(cancel, item=item):
                return item.program.run(runner, stdin=item.stdin, args=item.args, target=target,
                                        limits=limits, cancel=cancel)
            try:
                waited = interruptible(once, name="cancho-bench-run")
            except KeyboardInterrupt:  # between two runs
                raise BenchInterrupted(done, total) from None
            result, error = waited.value, waited.error
            if waited.interrupted or (result is not None and result.interrupted):
                raise BenchInterrupted(done, total)
            if error is not None:
                if isinstance(error, RunFailed):
                    raise BenchFailed(P.simple_failure(error.kind.value, f"{item.label}: {error.message}"))
                raise error
            failure = _judge_run(item, result, opts.expect_status)
            if failure is not None:
                raise BenchFailed(failure)
            if rnd >= opts.warmup:
                item.results.append(result)
            done += 1
            if progress is not None:
                progress.step(done, total, item.label)


def summary(values: list[float]) -> dict:
    return {"n": len(values), "median": float(statistics.median(values)), "min": float(min(values)),
            "max": float(max(values))}


def document(items: list[Item], opts: BenchOptions, values: dict[str, int] | None = None) -> dict:
    """The raw numbers (milliseconds, KiB) and their summaries: the display's metadata."""
    _target, how = bench_target(opts.stdout)
    first = [r.wall_seconds * 1e3 for r in items[0].results]
    out = []
    for it in items:
        wall = [r.wall_seconds * 1e3 for r in it.results]
        user = [r.user_seconds * 1e3 for r in it.results]
        system = [r.sys_seconds * 1e3 for r in it.results]
        rss = [r.peak_rss_bytes / 1024 for r in it.results]
        mcjit = [r.compile_seconds * 1e3 for r in it.results if r.compile_seconds is not None]
        pairs = [w / f for w, f in zip(wall, first) if f > 0]
        p = it.program
        out.append({
            "label": it.label, "ref": p.ref, "kind": p.kind, "backend": p.backend, "origin": p.origin,
            "args": it.args, "stdin_bytes": len(it.stdin),
            "build": {"compile_ms": None if p.compile_seconds is None else p.compile_seconds * 1e3,
                      "link_ms": None if p.link_seconds is None else p.link_seconds * 1e3,
                      "mcjit_ms": statistics.median(mcjit) if mcjit else None},
            "wall_ms": summary(wall), "user_ms": summary(user), "sys_ms": summary(system),
            "peak_rss_kib": summary(rss),
            "ratio": summary(pairs) if pairs else None,
            "ratio_of_medians": statistics.median(wall) / statistics.median(first) if statistics.median(first) > 0 else None,
            "samples": {"wall_ms": wall, "user_ms": user, "sys_ms": system, "peak_rss_kib": rss, "mcjit_ms": mcjit},
        })
    doc = {"schema": SCHEMA, "runs": opts.runs, "warmup": opts.warmup, "interleaved": True,
           "stdout": opts.stdout, "stdout_how": how, "expect_status": opts.expect_status, "items": out}
    if values:
        doc["values"] = dict(values)
    return doc


# -- progress ----------------------------------------------------------------------------------------------


class Progress:
    """A progress bar while a bench runs, as plain HTML (``<progress>``) in a display updated
    through its ``display_id``; when the bench ends it becomes one text line.

    Not an ipywidget: a widget leaves an empty placeholder (and a widget state that needs scripts
    from a CDN) in a saved or exported notebook, while an updated display is stored as its last
    state by every frontend, JupyterLab and nbclient alike. Updates are sent at most every
    ``interval`` seconds (and always for the last run), so a bench of many short runs does not
    flood the frontend."""

    interval = 0.1

    def __init__(self, ctx: Context, total: int, what: str) -> None:
        self.ctx, self.total, self.what = ctx, total, what
        self.display_id: str | None = None
        self.finished = False
        self.done = 0
        self.last_sent = 0.0
        if getattr(ctx, "silent", False) or not hasattr(ctx, "update"):
            return
        self.display_id = uuid.uuid4().hex
        ctx.display(self._bundle(0, "warm-up"), display_id=self.display_id)

    def _line(self, done: int) -> str:
        """The display's ``text/plain``: the same from the first display to the last (a frontend
        that ignores updates, like nbval, stores the first; Lab and nbclient store the last)."""
        if done < self.total and self.finished:
            return f"bench stopped after {done} of {self.total} runs ({self.what})"
        return f"bench: {self.total} runs ({self.what})"

    def _bundle(self, done: int, label: str) -> dict:
        status = f"{done} of {self.total} runs ({label})"
        return {"text/plain": self._line(done),
                "text/html": (f"<div class=\"cancho-progress\"><progress value=\"{done}\" max=\"{self.total}\" "
                              f"style=\"width:40%;vertical-align:middle\"></progress> "
                              f"<span>{html.escape(status)}</span></div>")}

    def step(self, done: int, total: int, label: str) -> None:
        self.done = done
        if self.display_id is None:
            return
        now = time.monotonic()
        if done < total and now - self.last_sent < self.interval:
            return
        self.last_sent = now
        self.ctx.update(self._bundle(done, label), display_id=self.display_id)

    def finish(self) -> None:
        """Leave one line saying what ran (no timing: it is compared by nbval)."""
        if self.display_id is None:
            return
        self.finished = True
        text = self._line(self.done)
        self.ctx.update({"text/plain": text, "text/html": f"<div class=\"cancho-progress\">{html.escape(text)}</div>"},
                        display_id=self.display_id)
        self.display_id = None


def run_bench(ctx: Context, programs: list[tuple[Program, str]], opts: BenchOptions,
              values: dict[str, int] | None = None, show_progress: bool = True) -> dict:
    """Measure and return the document; raises BenchFailed / BenchInterrupted."""
    items = make_items(programs, opts, values)
    progress = Progress(ctx, (opts.warmup + opts.runs) * len(items),
                        " vs ".join(i.label for i in items)) if show_progress else None
    try:
        measure(ctx.runner, items, opts, progress)
    finally:
        if progress is not None:
            progress.finish()
    return document(items, opts, values)


def publish(ctx: Context, doc: dict, claims: list[Claim] | None = None) -> None:
    """The plot as its own output, then the table as the cell's result; a claim that does not
    hold then fails the cell (the reader sees the measurement that refuted it)."""
    verdicts = C.judge(claims or [], doc)
    if verdicts:
        doc["claims"] = C.metadata(verdicts)
    shown = plots.displays(doc)
    if shown.plot is not None:
        ctx.display(shown.plot.data, shown.plot.metadata)
    ctx.result(shown.table.data, shown.table.metadata)
    failed = [v for v in verdicts if not v.holds]
    if failed:
        ctx.fail(P.simple_failure("claim-failed", "; ".join(
            f"{v.claim.text} does not hold: the paired median of CPU time is {v.ratio:.2f}" for v in failed)))


def _bench_and_publish(ctx: Context, programs: list[tuple[Program, str]], opts: BenchOptions) -> None:
    try:
        C.check_names(opts.claims, [(label, prog.ref) for prog, label in programs])
    except ClaimError as e:
        raise DirectiveError(str(e)) from None
    try:
        doc = run_bench(ctx, programs, opts)
    except BenchFailed as e:
        ctx.fail(e.failure)
        return
    except BenchInterrupted as e:
        ctx.fail(P.simple_failure("KeyboardInterrupt", f"bench interrupted after {e.done} of {e.total} runs; "
                                                       "nothing was measured; the session is kept"))
        return
    publish(ctx, doc, opts.claims)


def resolve_names(ctx: Context, names: list[str]) -> list[tuple[Program, str]]:
    out = []
    for ref in names:
        prog = ctx.session.programs.resolve(ref)
        if prog is None:
            known = ", ".join(ctx.session.programs.names()) or "none yet"
            raise DirectiveError(f"bench: no program named `{ref}` (keep one with `%%run --name NAME` or "
                                 f"`%%c NAME`; known: {known})")
        out.append((prog, prog.label))
    labels = [label for _p, label in out]
    if len(set(labels)) != len(labels):
        raise DirectiveError("bench: a program is named twice")
    return out


# -- directives -------------------------------------------------------------------------------------------


@directive("%bench", "%bench A B ... [--runs N] [--warmup N] [--stdout /dev/null|pipe|/dev/full|closed] "
           "[--stdin TEXT | --stdin-file PATH] [--timeout S] [--expect-status N] [--args A ...] [--claim \"A / B < K\" ...]",
           "time named programs (`%%run --name`, `%%c NAME`; `C:NAME` is the C baseline): a warm-up round, "
           "then N interleaved runs each (default 9) to /dev/null; plot, table, ratios to the first; "
           "--claim checks a ratio (paired median of CPU times, user + sys) and fails the cell when it does not hold")
def _bench_line(ctx: Context, args: str, body: Body) -> None:
    if not body.blank:
        raise DirectiveError("%bench times named programs; to time this cell's program use %%bench")
    opts = parse_bench_options(args, ctx, cell=False)
    if not opts.names:
        raise DirectiveError("%bench: name at least one program, e.g. `%bench putchar C:putchar`")
    _bench_and_publish(ctx, resolve_names(ctx, opts.names), opts)


@directive("%%bench", "%%bench [NAMES ...] [--backend jit|exe|both] [--name NAME] [--runs N] [--warmup N] "
           "[--stdout TARGET] [--stdin TEXT | --stdin-file PATH] [--timeout S] [--expect-status N] [--args A ...] "
           "[--claim \"A / B < K\" ...] [--interactive --arg NAME=LOW:HIGH[:STEP] ...]",
           "time the cell's program (its `main`, or the last one) first, then the named programs; "
           "--interactive adds sliders that substitute {NAME} in the cell text and in --args, and rerun")
def _bench_cell(ctx: Context, args: str, body: Body) -> None:
    opts = parse_bench_options(args, ctx, cell=True)
    others = resolve_names(ctx, opts.names)
    if opts.interactive:
        from .explorer import start_explorer

        start_explorer(ctx, body, opts, others)
        return
    if body.blank and ctx.session.last_main is None:
        raise DirectiveError("%%bench: no `main` yet: write `fn main(world: World) -> [] int` in the cell")
    outcome = ctx.session.process(body.source(ctx.session), compile=True, use_last_main=True)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return
    ctx.session.commit(outcome)
    if outcome.ir is None:
        raise DirectiveError("%%bench: no `main` yet: write `fn main(world: World) -> [] int` in the cell")
    base = opts.name or "cell"
    programs = []
    try:
        for b in opts.backends:
            prog = cancho_program(ctx, base, outcome.ir, b, outcome.timings, outcome.source.path,
                                  source=body.text)
            label = base if len(opts.backends) == 1 else f"{base} [{b}]"
            programs.append((prog, label))
    except BenchFailed as e:
        ctx.fail(e.failure)
        return
    if opts.name:
        ctx.session.programs.put(programs[0][0])
    _bench_and_publish(ctx, programs + others, opts)


@directive("%%c", "%%c NAME [--cflags FLAGS] [--ldflags FLAGS] [--run [--stdin TEXT | --stdin-file PATH] [--args A ...]]",
           "compile the cell's C text with `cc -O2` and keep it as the baseline NAME (`C:NAME` in %bench); "
           "--run also runs it once")
def _c(ctx: Context, args: str, body: Body) -> None:
    p = _Parser(prog="%%c", add_help=False)
    p.add_argument("name")
    p.add_argument("--cflags", default=None)
    p.add_argument("--ldflags", default=None)
    p.add_argument("--run", action="store_true")
    p.add_argument("--stdin", default=None)
    p.add_argument("--stdin-file", default=None)
    p.add_argument("--args", nargs="*", default=[])
    ns = p.parse_directive(args)
    if not valid_name(ns.name):
        raise DirectiveError(f"%%c: `{ns.name}` is not a program name (letters, digits, _ . -)")
    if body.blank:
        raise DirectiveError("%%c: the cell has no C text")
    try:
        prog = compile_baseline(ctx.session.programs, ns.name, body.text, line_offset=body.line_offset,
                                cell_name=body.cell_name or "cell", cflags=split_flags(ns.cflags),
                                ldflags=split_flags(ns.ldflags),
                                sandbox=ctx.runner.caps.sandbox if ctx.runner.caps else None)
    except CFailure as e:
        ctx.fail(e.failure)
        return
    prog.stdin = stdin_of(ns)
    prog.args = list(ns.args)
    replaced = ctx.session.programs.put(prog)
    kept = f"{'replaced' if replaced else 'kept'} C baseline `{prog.ref}` (cc -O2)"
    meta = {"cancho": {"program": prog.ref, "compile_seconds": prog.compile_seconds,
                       "link_seconds": prog.link_seconds}}
    if not ns.run:
        ctx.display({"text/plain": kept}, meta)
        return
    run_once(ctx, prog, kept, meta)


def run_once(ctx: Context, prog: Program, note: str, meta: dict) -> None:
    """Run a named program once the way ``%%run`` shows a run."""
    target = StdoutTarget.pipe()
    limits = ctx.settings.run_limits()
    waited = interruptible(
        lambda cancel: prog.run(ctx.runner, stdin=prog.stdin, args=prog.args, target=target, limits=limits,
                                cancel=cancel), name="cancho-bench-run")
    result, error = waited.value, waited.error
    if result is not None:
        if result.stdout:
            ctx.stream("stdout", result.stdout.decode("utf-8", errors="replace"))
        if result.stderr:
            ctx.stream("stderr", result.stderr.decode("utf-8", errors="replace"))
    if error is not None:
        if isinstance(error, RunFailed):
            ctx.fail(P.simple_failure(error.kind.value, error.message))
            return
        raise error
    if waited.interrupted and result is None:
        ctx.fail(P.simple_failure("KeyboardInterrupt", "interrupted before the program started"))
        return
    failure = P.judge(result, target, None, None)
    if failure is not None:
        ctx.fail(failure)
        return
    meta["cancho"] = {**P.run_metadata(result, prog.backend, target)["cancho"], **meta["cancho"]}
    ctx.result({"text/plain": f"{note}\n{P.summary(result, target)}"}, meta)


@directive("%programs", "%programs", "list the named programs and C baselines %bench can time")
def _programs(ctx: Context, args: str, body: Body) -> None:
    if args.strip():
        raise DirectiveError("%programs takes no options")
    progs = ctx.session.programs.all()
    if not progs:
        ctx.display({"text/plain": "no named programs yet (`%%run --name NAME`, `%%bench --name NAME`, `%%c NAME`)"})
        return
    lines = []
    for p in progs:
        what = "C baseline, cc -O2" if p.kind == "c" else f"cancho, {p.backend}"
        lines.append(f"{p.ref}: {what}" + (f", from {p.origin}" if p.origin else ""))
    meta = {"cancho": {"programs": [{"ref": p.ref, "kind": p.kind, "backend": p.backend, "origin": p.origin,
                                     "compile_seconds": p.compile_seconds, "link_seconds": p.link_seconds}
                                    for p in progs]}}
    ctx.display({"text/plain": "\n".join(lines)}, meta)
