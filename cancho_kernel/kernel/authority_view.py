"""``%authority [--json]`` and ``%%authority``: the authority report of the session's program
(docs/authority-report.md) in a notebook.

* ``%%authority`` checks the cell with the session (its ``main``, or the last one when it has
  none), commits its items like ``%%check``, and shows the report of that program; nothing runs.
* ``%authority`` (on a cell of its own) shows the report of the last ``main``.
* ``%%authority --target wasm32-wasip1`` compiles the program for WASI, builds its module and
  adds the functions the module imports (``compiler/backends/wasm.py``), as
  ``cancho authority --target wasm32-wasip1`` does (docs/cli.md).

Output: ``text/html`` a readable table (labels, the categories the program never touches, the
symbols it is unbounded by, provably pure functions) with ``text/plain`` the exact text report
(what ``cancho authority`` prints); the report's data rides in the metadata. With ``--json`` the
output is the exact JSON text (``cancho authority --output json``) and nothing else: JupyterLab
shows an ``application/json`` bundle as a collapsed tree, which hides the words a reader looks for.
"""

from __future__ import annotations

import html

from . import presentation as P
from .directives import Body, Context, directive
from .options import DirectiveError, split_args


def _report(program):
    from ..compiler.authority import authority_report

    return authority_report(program)


def _html(rep) -> str:
    def cell_list(items: list[str], empty: str) -> str:
        if not items:
            return f"<i>{html.escape(empty)}</i>"
        return "<br>".join(f"<code>{html.escape(x)}</code>" for x in items)

    labels = [str(l) + (" ← unbounded" if l.name == "ffi" else "") for l in rep.labels]
    rows = [
        ("performs", cell_list(labels, "nothing")),
        ("never touches", cell_list(rep.untouched(), "— (touches every category)")),
        ("unbounded by", cell_list(rep.unbounded_by, "nothing: every foreign call is bounded" if rep.bounded
                                   else "")),
        ("foreign symbols", cell_list(rep.foreign_symbols, "none")),
        (f"provably pure ({len(rep.pure)} of {rep.functions})", cell_list(rep.pure, "none")),
        ("evaluated at compile time", f"{rep.folded_operators} operators, {rep.folded_calls} calls"),
    ]
    if rep.wasi_imports is not None:
        rows.append((f"imports ({rep.wasi_target})", cell_list(rep.wasi_imports, "nothing")))
    head = ("<p><b style=\"color:#b00\">UNBOUNDED</b>: this program calls foreign code; the labels bound it "
            "everywhere except through the symbols under “unbounded by”.</p>" if not rep.bounded
            else "<p><b>bounded</b>: everything this program may reach is in its labels.</p>")
    body = "".join(f"<tr><th style=\"text-align:left;vertical-align:top\">{html.escape(k)}</th><td "
                   f"style=\"text-align:left\">{v}</td></tr>" for k, v in rows)
    return f"{head}<table class=\"cancho-authority\"><tbody>{body}</tbody></table>"


def show(ctx: Context, program, as_json: bool, wasi_imports: list | None = None) -> None:
    try:
        rep = _report(program)
    except ImportError:
        ctx.fail(P.simple_failure("unavailable", "the authority report is not built yet "
                                                 "(cancho_kernel/compiler/authority.py)"))
        return
    if wasi_imports is not None:
        from ..compiler.authority import with_wasi_imports

        rep = with_wasi_imports(rep, "wasm32-wasip1", wasi_imports)
    meta = {"cancho": {"authority": rep.data}}
    if as_json:
        ctx.display({"text/plain": rep.to_json().rstrip("\n")}, meta)
    else:
        ctx.display({"text/plain": rep.text().rstrip("\n"), "text/html": _html(rep)}, meta)


def _program_of(ctx: Context, body: Body, what: str):
    outcome = ctx.session.process(body.source(ctx.session), compile=False, use_last_main=True)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return None
    if not outcome.has_main:
        raise DirectiveError(f"{what} reports on a program: write a `main` in the cell or run one first")
    ctx.session.commit(outcome)
    return outcome.program


@directive("%authority", "%authority [--json]", "show the authority report (docs/authority-report.md) of the last `main` "
           "with the session's items: what it performs, never touches, is unbounded by")
def _authority_line(ctx: Context, args: str, body: Body) -> None:
    words = split_args(args)
    if words not in ([], ["--json"]):
        raise DirectiveError("%authority takes only --json")
    if not body.blank:
        raise DirectiveError("%authority reports on the last `main`; to report on this cell's program use %%authority")
    if ctx.session.last_main is None:
        raise DirectiveError("%authority: no `main` yet: run a cell with `fn main(world: World) -> [] int` first")
    program = _program_of(ctx, body, "%authority")
    if program is not None:
        show(ctx, program, words == ["--json"])


def _cell_options(args: str) -> tuple[bool, bool]:
    """(``--json``, ``--target wasm32-wasip1``) of a `%%authority` line; anything else refused."""
    words = split_args(args)
    as_json = "--json" in words
    rest = [w for w in words if w != "--json"]
    if rest == []:
        return as_json, False
    if len(rest) == 2 and rest[0] == "--target" and rest[1] in ("wasm32-wasip1", "wasm32-wasi"):
        return as_json, True
    raise DirectiveError("%%authority takes --json and --target wasm32-wasip1")


def _wasm_program(ctx: Context, body: Body):
    """The cell's program compiled for wasm32 (committed as %%check would), with its imports."""
    from ..compiler.backends import wasm
    from ..compiler.run import RunFailed, failures_mapped
    from ..compiler.target import WASM32_WASIP1

    outcome = ctx.session.process(body.source(ctx.session), compile=True, use_last_main=True,
                                  target=WASM32_WASIP1)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return None, None
    if not outcome.has_main:
        raise DirectiveError("%%authority reports on a program: write a `main` in the cell or run one first")
    ctx.session.commit(outcome)
    try:
        with failures_mapped():
            return outcome.program, wasm.imports_of_ir(outcome.ir)
    except RunFailed as e:
        ctx.fail(P.simple_failure(e.kind.value, e.message))
        return None, None


@directive("%%authority", "%%authority [--json] [--target wasm32-wasip1]", "check the cell with the session "
           "(its `main`, or the last one) and show the program's authority report instead of running it; "
           "--target wasm32-wasip1 also lists the functions its WebAssembly module imports")
def _authority_cell(ctx: Context, args: str, body: Body) -> None:
    as_json, wasi = _cell_options(args)
    if not wasi:
        program = _program_of(ctx, body, "%%authority")
        if program is not None:
            show(ctx, program, as_json)
        return
    program, imports = _wasm_program(ctx, body)
    if program is not None:
        show(ctx, program, as_json, imports)


__all__ = ["show"]
