"""`%%test`: a cell's `fn test_*` run as `cancho test` runs them (cancho_kernel/testing.py).

The cell is checked with the session and its items join it (as `%%check` does); its root-module
``fn test_*`` are collected with the runner's own shape rules, the runner's generated ``main``
is compiled once against the session (a file of its own, edition 1, never committed), and each
test runs in a process of its own (``argv[1]`` names it), so one test's trap cannot hide the
next. The verdicts are a table: name, ok / returned N / trapped (the located trap when the run
carries one, `testing.trap_detail`), wall time. The cell fails when a test fails, with the
runner's exit status 4 in the error's words; a cell without tests fails as the runner's exit 2.
"""

from __future__ import annotations

import html

from ..compiler import api
from ..compiler.source import SourceFile
from .. import testing
from . import presentation as P
from .directives import Body, Context, DirectiveError, directive
from .options import BACKENDS, _Parser, _check_caps, limits_of
from .runner import RunRequest

USAGE = "%%test [--backend jit|exe] [--timeout S] [--memory N] [--cpu S] [--max-output N]"


def _parser() -> _Parser:
    p = _Parser(prog="%%test", add_help=False)
    p.add_argument("--backend", choices=BACKENDS)
    for flag in ("--timeout", "--memory", "--cpu", "--max-output", "--processes"):
        p.add_argument(flag)
    return p


def collected(source: SourceFile) -> testing.Collected:
    """The cell's tests by the runner's rules; a cell in a module of its own is refused (the
    generated main reaches root-module tests only)."""
    parsed, diags = api.parse_source(source)
    if parsed is None or diags:
        raise DirectiveError("%%test: the cell does not parse")  # the check reported it first
    if parsed.module_name:
        raise DirectiveError("%%test runs the tests of a root-module cell; this cell is "
                             f"module `{parsed.module_name}`")
    return testing.collect([parsed])


def table(outcomes: list[testing.TestOutcome]) -> tuple[str, str]:
    """The verdicts as text and as an HTML table."""
    width = max(len(o.name) for o in outcomes)
    lines = [f"{o.name:<{width}}  {o.short:<20}  {o.seconds * 1000:8.1f} ms" for o in outcomes]
    passed = sum(o.ok for o in outcomes)
    foot = f"{passed} passed; {len(outcomes) - passed} failed"
    rows = "".join(
        f"<tr class=\"{'ok' if o.ok else 'failed'}\"><td style=\"text-align:left\"><code>{html.escape(o.name)}"
        f"</code></td><td style=\"text-align:left;color:{'#1a7f37' if o.ok else '#cf222e'}\">"
        f"{html.escape(o.short)}</td><td>{o.seconds * 1000:.1f} ms</td></tr>" for o in outcomes)
    doc = (f"<table class=\"cancho-tests\"><thead><tr><th style=\"text-align:left\">test</th>"
           f"<th style=\"text-align:left\">result</th><th>time</th></tr></thead><tbody>{rows}</tbody>"
           f"</table><p>{html.escape(foot)}</p>")
    return "\n".join([*lines, foot]), doc


def _outputs(ctx: Context, outcomes: list[testing.TestOutcome]) -> None:
    """What a failed test wrote, under its name (what `cancho test` shows in its failures)."""
    for o in outcomes:
        if o.ok:
            continue
        for name, data in (("stdout", o.result.stdout), ("stderr", o.result.stderr)):
            if data:
                text = data.decode("utf-8", "replace")
                ctx.stream(name, f"---- {o.name} ({name}) ----\n" + text + ("" if text.endswith("\n") else "\n"))


@directive("%%test", USAGE,
           "check the cell with the session (its items join it) and run each of its `fn test_*` "
           "as `cancho test` does: one process per test, a test passes by answering 0; shown as a "
           "table (name, ok / returned N / trapped, time); the cell fails when a test fails")
def _test(ctx: Context, args: str, body: Body) -> None:
    ns = _parser().parse_directive(args)
    limits = limits_of(ns, ctx.settings)
    _check_caps(limits, ctx.settings)
    source = body.source(ctx.session)
    outcome = ctx.session.process(source, compile=False)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return
    found = collected(source)
    if found.errors:
        ctx.fail(P.simple_failure("test-shape", found.errors[0], found.errors[1:]))
        return
    if not found.tests:
        ctx.fail(P.simple_failure("no-tests", "no `fn test_*` in the cell: `%%test` runs every "
                                  "`fn test_*` the cell defines, and a run that finds none is not a pass"))
        return
    ctx.session.commit(outcome)
    main = SourceFile(testing.GENERATED_PATH, "edition 1;\n" + testing.generate_main(found.tests, []))
    program = ctx.session.process(main, compile=True)
    if not program.ok or program.ir is None:
        ctx.fail(P.refusal(program.diagnostics))
        return
    backend = ns.backend or ctx.settings.backend
    outcomes = []
    for t in found.tests:
        run = ctx.runner.run(RunRequest(ir=program.ir, backend=backend, args=[t.name], limits=limits))
        if run.failure is not None or run.result is None:
            why = "interrupted" if run.interrupted else (run.failure.message if run.failure else "no result")
            ctx.fail(P.simple_failure("run-failed", f"{t.name}: {why}"))
            return
        outcomes.append(testing.judge(t.name, run.result, program.traps))
        if run.interrupted:
            break
    text, doc = table(outcomes)
    failed = [o for o in outcomes if not o.ok]
    ctx.display({"text/plain": text, "text/html": doc},
                {"cancho": {"tests": [{"name": o.name, "verdict": o.verdict.value, "short": o.short,
                                       "seconds": o.seconds} for o in outcomes]}})
    _outputs(ctx, outcomes)
    if failed:
        ctx.fail(P.simple_failure("tests-failed", f"{len(failed)} of {len(outcomes)} tests failed: "
                                  + ", ".join(f"{o.name} ({o.short})" for o in failed)))
