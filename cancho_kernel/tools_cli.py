"""The reference's source tools on the command line: `cancho fmt`, `ids`, `layout` and `print`
(``cli.py`` parses their arguments and dispatches here).

`fmt FILE|DIR... [--check]` (the reference's `docs/formatting.md`): each file, or each `.cho` under a
directory (sorted, names starting with `.` skipped), is rewritten in the canonical layout only if
its text changes (`formatted PATH` on stdout); `--check` writes nothing and says `would reformat
PATH`. A file that does not parse is reported with its located diagnostic, one that cannot be
formatted as `PATH: not formatted: WHY`, and either is left alone. Exit 1 if any file could not be
formatted or, under `--check`, would change; 0 otherwise (the reference's codes: one status for
both, the message says which).

`print FILE` renders one parsed file in the canonical layout (``compiler/printer.py``): the tree's
text, without the comments the tree does not hold; `fmt` is the formatter.

`ids` and `layout` check the program first (an identity or a layout of something that does not
compile is not handed out), then print the reference's reports: `compiler/ids.py`,
`compiler/layout_report.py`. Only the declarations of the files named are listed; the std modules
they import are part of the program, so what they declare resolves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .compiler.diagnostics import render_text
from .compiler.run import os_error_text

EXIT_OK, EXIT_REFUSED, EXIT_ENVIRONMENT = 0, 1, 3


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _err(text: str) -> None:
    if sys.stderr is not None:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")


def collect(path: Path, out: list[Path], seen: set[Path] | None = None) -> None:
    """Every `.cho` under `path` (sorted, dot-names skipped), or `path` itself if not a directory.
    A directory reached twice (a symbolic link back up the tree) is walked once."""
    if not path.is_dir():
        out.append(path)
        return
    seen = set() if seen is None else seen
    real = path.resolve()
    if real in seen:
        return
    seen.add(real)
    for entry in sorted(path.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() or entry.suffix == ".cho":
            collect(entry, out, seen)


def cmd_fmt(inputs: list[str], check: bool) -> int:
    """`cancho fmt`: see the module docstring."""
    from .compiler.fmt import Failure, FormatError, format_text

    files: list[Path] = []
    try:
        for name in inputs:
            collect(Path(name), files)
    except OSError as exc:
        _err(f"cannot read directory `{exc.filename}`: {os_error_text(exc)}")
        return EXIT_ENVIRONMENT
    changed = failed = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = os_error_text(exc) if isinstance(exc, OSError) else "it is not UTF-8"
            _err(f"cannot read `{path}`: {why}")
            return EXIT_ENVIRONMENT
        try:
            formatted = format_text(text, str(path))
        except FormatError as exc:
            failed += 1
            if exc.failure is Failure.PARSE and exc.diagnostic is not None:
                _err(render_text([exc.diagnostic]))
            else:
                _err(f"{path}: not formatted: {exc.why}")
            continue
        except Exception as exc:  # noqa: BLE001 - our bug: reported, the file left alone
            failed += 1
            _err(f"{path}: not formatted: the formatter failed ({type(exc).__name__}: {exc}); "
                 "this is a bug in cancho")
            continue
        if formatted == text:
            continue
        changed += 1
        if check:
            _out(f"would reformat {path}\n")
            continue
        try:
            _write_atomically(path, formatted)
        except OSError as exc:
            _err(f"cannot write `{path}`: {os_error_text(exc)}")
            return EXIT_ENVIRONMENT
        _out(f"formatted {path}\n")
    return EXIT_REFUSED if failed or (check and changed) else EXIT_OK


def _write_atomically(path: Path, text: str) -> None:
    """Replace the file's text in one step, keeping its mode: never half a file. A symbolic link
    is written through, as a plain write would, and stays a link."""
    path = path.resolve()
    tmp = path.with_name(f".{path.name}.cancho-fmt-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def cmd_print(name: str) -> int:
    """`cancho print`: one file's canonical text; a parse error is refused at its place."""
    from .compiler import api
    from .compiler.printer import print_file

    try:
        source = api.load_sources([name])[0]
    except OSError as exc:
        _err(f"cannot read `{name}`: {os_error_text(exc)}")
        return EXIT_ENVIRONMENT
    tree, diags = api.parse_source(source)
    if tree is None:
        _err(render_text(diags))
        return EXIT_REFUSED
    _out(print_file(tree))
    return EXIT_OK


def _checked(inputs: list[str]):
    """The checked program, or an exit status after the refusals (or the unreadable input)."""
    from .compiler import api

    try:
        sources = api.load_sources(inputs)
    except OSError as exc:
        name = exc.filename if exc.filename is not None else inputs[0]
        _err(f"cannot read `{name}`: {os_error_text(exc)}")
        return None, EXIT_ENVIRONMENT
    result = api.check_sources(sources)
    if result.diagnostics:
        _err(render_text(result.diagnostics))
        return None, EXIT_REFUSED
    return result.program, EXIT_OK


def cmd_ids(inputs: list[str]) -> int:
    """`cancho ids`: each declaration's `sig` and `body` (or type identity)."""
    from .compiler.ids import identify, render_ids

    program, status = _checked(inputs)
    if program is None:
        return status
    named = {str(Path(p)) for p in inputs}
    report = [f for f in program.files if str(Path(f.source.path)) in named]
    _out(render_ids(identify(list(program.files), report)))
    return EXIT_OK


def cmd_layout(inputs: list[str]) -> int:
    """`cancho layout`: every declared type's leaves, size, packed size and stride."""
    from .compiler.layout_report import layout_rows, render_layout

    program, status = _checked(inputs)
    if program is None:
        return status
    _out(render_layout(layout_rows(program.types)))
    return EXIT_OK
