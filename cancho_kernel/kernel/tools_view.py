"""``%%fmt``, ``%layout [TYPE]`` and ``%ids``: the reference's source tools in a notebook
(the CLI's are ``tools_cli.py``).

* ``%%fmt`` formats the cell's text (``compiler/fmt.py``) and shows what changed as a unified diff
  (or says it is already in the canonical layout). ``%%fmt --replace`` also rewrites the cell: the
  kernel cannot edit a cell, so the new text goes back as a ``set_next_input`` payload with
  ``replace: true``, which JupyterLab and Notebook 7 apply to the cell itself (its directive lines
  go). It is asked for, not the default, because a frontend applies it to the cell it thinks is
  current: under Run All, JupyterLab's current cell is not the one that ran. Nothing is checked
  or run, and the session does not change.
* ``%layout [TYPE]`` (on a cell of its own) shows ``cancho layout``'s table for the session's types,
  or one type's row.
* ``%ids`` (on a cell of its own) shows ``cancho ids``'s report for the session's items.

The two reports check the session's program first, as the CLI does, and are published as
``text/plain``: the exact text the command prints.
"""

from __future__ import annotations

import difflib

from . import presentation as P
from .directives import Body, Context, directive
from .options import DirectiveError, split_args


@directive("%%fmt", "%%fmt [--replace]", "format the cell's text in the canonical layout (comments, blank "
           "lines and literal spellings kept): shows the diff; with --replace the cell's text is replaced by "
           "it (not under Run All: the frontend replaces its current cell); nothing runs")
def _fmt(ctx: Context, args: str, body: Body) -> None:
    from ..compiler.fmt import Failure, FormatError, format_text

    words = split_args(args)
    if words not in ([], ["--replace"]):
        raise DirectiveError(f"%%fmt takes only --replace, not `{' '.join(words)}`")
    replace = words == ["--replace"]
    name = body.path or body.cell_name or "cell"
    written = body.text if body.text.endswith("\n") else body.text + "\n"  # a cell has no final newline
    try:
        formatted = format_text(written, name)
    except FormatError as exc:
        if exc.failure is Failure.PARSE and exc.diagnostic is not None:
            ctx.fail(P.refusal([_in_cell(exc.diagnostic, body, ctx)]))
        else:
            ctx.fail(P.simple_failure("not-formatted", f"{name}: not formatted: {exc.why}"))
        return
    if formatted == written:
        ctx.display({"text/plain": "already in the canonical layout"})
        return
    diff = "".join(difflib.unified_diff(written.splitlines(keepends=True), formatted.splitlines(keepends=True),
                                        fromfile=f"{name} (as written)", tofile=f"{name} (formatted)"))
    ctx.display({"text/plain": diff.rstrip("\n")}, {"cancho": {"formatted": formatted}})
    payload = getattr(ctx, "payload", None)
    if replace and payload is not None:
        payload.append({"source": "set_next_input", "text": formatted.rstrip("\n"), "replace": True})


def _in_cell(diagnostic, body: Body, ctx: Context):
    """The parse error read again from the cell's own source, so it points at the cell's lines."""
    from ..compiler.parser import parse_file

    _, diags = parse_file(body.source(ctx.session))
    return diags[0] if diags else diagnostic


def _session_program(ctx: Context, body: Body, what: str):
    """The session's checked program (the cell must be empty: these report on the session)."""
    if not body.blank:
        raise DirectiveError(f"{what} reports on the session's items: put it on a cell of its own")
    outcome = ctx.session.process(body.source(ctx.session), compile=False, use_last_main=True)
    if not outcome.ok:
        ctx.fail(P.refusal(outcome.diagnostics))
        return None
    return outcome.program


@directive("%layout", "%layout [TYPE]", "show each session type's leaves, size, packed size and stride "
           "(`cancho layout`), or TYPE's")
def _layout(ctx: Context, args: str, body: Body) -> None:
    from ..compiler.layout_report import layout_rows, render_layout

    words = split_args(args)
    if len(words) > 1:
        raise DirectiveError("%layout takes at most one type name, e.g. `%layout Rgb`")
    program = _session_program(ctx, body, "%layout")
    if program is None:
        return
    rows = layout_rows(program.types)
    if words:
        rows = [r for r in rows if r.name == words[0]]
        if not rows:
            raise DirectiveError(f"%layout: no non-generic struct or enum `{words[0]}` in the session "
                                 "(a generic declaration has no one layout)")
    ctx.display({"text/plain": render_layout(rows).rstrip("\n")})


@directive("%ids", "%ids", "show each session declaration's content hash (`cancho ids`): a sig and a body per "
           "function, one per type")
def _ids(ctx: Context, args: str, body: Body) -> None:
    from ..compiler.ids import identify, render_ids
    from .session import PLACEHOLDER_MAIN

    if split_args(args):
        raise DirectiveError("%ids takes no options")
    program = _session_program(ctx, body, "%ids")
    if program is None:
        return
    files = list(program.files)
    own = [f for f in files if not f.module_name.startswith("std.") and f.source.text != PLACEHOLDER_MAIN]
    text = render_ids(identify(files, own)).rstrip("\n")
    ctx.display({"text/plain": text or "the session declares nothing yet"})


__all__: list[str] = []
