"""How results look in a notebook: refusals, run outcomes, definitions, tables.

Rules (kernel.md §2.4, §3.6–3.7):

* A refusal is an ``error`` with ``ename`` = rule tag, ``evalue`` = message and ``traceback`` =
  the rendered diagnostic with ANSI colour.
* ``text/plain`` carries nothing that changes from run to run (no timings, no temp paths), so
  strict nbval can compare it; timings and raw numbers go in the metadata (``cancho`` key).
* A run's outcome is one ``execute_result`` (``returned 0`` ...) when it is what the cell
  expects, else one ``error`` whose ``ename`` says how it ended:

  ========================  ==========================================================
  ``trapped``               killed by SIGILL (a cancho trap)
  ``killed-by-signal``      any other signal (SIGPIPE on a ``broken-pipe`` run is expected)
  ``exit-status``           returned a non-zero status
  ``timed-out``             the wall-time limit ended it
  ``KeyboardInterrupt``     the notebook's stop button ended it
  ``unexpected-outcome``    ``--expect-status`` / ``--expect-signal`` did not match
  ========================  ==========================================================
"""

from __future__ import annotations

import html
import os
import signal as _signal
from dataclasses import dataclass

from ..compiler.backends.process import RunLimits, RunResult, StdoutKind, StdoutTarget, signal_name
from ..compiler.diagnostics import Diagnostic, Rule
from ..compiler.trapsites import TrapKind, TrapSite

RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


@dataclass
class Failure:
    """An ``error`` message to publish."""

    ename: str
    evalue: str
    traceback: list[str]


def refusal(diags: list[Diagnostic]) -> Failure:
    """The first refusal names the error; the traceback shows every diagnostic, coloured."""
    first = diags[0]
    tb: list[str] = []
    for i, d in enumerate(diags):
        if i:
            tb.append("")
        tb.extend(d.render(color=True).split("\n"))
        tb.append(f"{BOLD}[{d.rule}]{RESET} {d.explanation}")
    return Failure(first.rule, first.message, tb)


def refusal_plain(diags: list[Diagnostic]) -> str:
    """The diagnostics as ordinary output (no colour), for ``%%refused``."""
    parts = []
    for d in diags:
        parts.append(f"{d.render(color=False)}\n[{d.rule}] {d.explanation}")
    return "\n\n".join(parts) + "\n"


def simple_failure(ename: str, evalue: str, detail: list[str] | None = None) -> Failure:
    """An error that is not a refusal; ``ename`` may be a :class:`Rule` or another enum's member,
    published as its plain text."""
    ename = str(ename)
    return Failure(ename, evalue, [f"{RED}{BOLD}{ename}{RESET}: {evalue}", *(detail or [])])


# -- runs --------------------------------------------------------------------------------------


def target_line(target: StdoutTarget, result: RunResult) -> str | None:
    """For a run whose stdout was not an ordinary pipe: what reached the file."""
    kind = target.kind
    if kind is StdoutKind.DEV_FULL:
        return "stdout was /dev/full: 0 bytes reached it"
    if kind is StdoutKind.CLOSED:
        return "stdout was closed (>&-): 0 bytes reached it"
    if kind is StdoutKind.FILE:
        try:
            size = os.fstat(target.fd).st_size if target.fd is not None else os.path.getsize(target.path)
        except OSError:
            size = 0
        return f"stdout went to the file {target.path}: {size} byte{'s' if size != 1 else ''}"
    if kind is StdoutKind.BROKEN_PIPE:
        n = target.broken_after
        return (f"stdout was a pipe whose reader left after {n} byte{'s' if n != 1 else ''}: "
                f"{result.stdout_total} byte{'s' if result.stdout_total != 1 else ''} reached it")
    return None


def summary(result: RunResult, target: StdoutTarget) -> str:
    """``text/plain`` of a run: how it ended, where stdout went, what was cut."""
    lines = [result.describe()]
    t = target_line(target, result)
    if t:
        lines.append(t)
    for name, kept, total, cut in (("stdout", len(result.stdout), result.stdout_total, result.stdout_truncated),
                                   ("stderr", len(result.stderr), result.stderr_total, result.stderr_truncated)):
        if cut:
            lines.append(f"{name} truncated after {kept} bytes ({total} bytes in all; raise the limit with "
                         f"--max-output)")
    return "\n".join(lines)


def run_metadata(result: RunResult, backend: str, target: StdoutTarget) -> dict:
    return {"cancho": {
        "backend": backend, "stdout_target": target.kind.value, "exit_status": result.exit_status,
        "signal": result.signal, "timed_out": result.timed_out, "interrupted": result.interrupted,
        "stdout_bytes": result.stdout_total, "stderr_bytes": result.stderr_total,
        "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
        "wall_seconds": result.wall_seconds, "user_seconds": result.user_seconds,
        "sys_seconds": result.sys_seconds, "peak_rss_bytes": result.peak_rss_bytes,
        "compile_seconds": result.compile_seconds,
    }}


def _size(n: int) -> str:
    """A size as a directive takes it: ``8G``, ``128M``."""
    return f"{n >> 30}G" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{max(1, n >> 20)}M"


def _shown(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{max(1, n >> 20)} MiB"


# Signals a failed allocation or thread creation ends a program with: a cancho trap (SIGILL),
# or, in foreign code, a fault or an abort.
_MEMORY_SIGNALS = (_signal.SIGILL, _signal.SIGSEGV, _signal.SIGBUS, _signal.SIGABRT)


def limit_hint(result: RunResult, limits: RunLimits | None) -> str | None:
    """The limit in force that plausibly ended the run, and the directive that raises it (a
    trap says nothing of why: under a memory limit, a failed allocation or a thread that could
    not get its stack traps too)."""
    if limits is None or result.signal is None or result.timed_out or result.interrupted:
        return None
    sig, cpu = result.signal, limits.cpu_seconds
    if cpu is not None and (sig == _signal.SIGXCPU or
                            (sig == _signal.SIGKILL and result.user_seconds + result.sys_seconds >= cpu)):
        return f"CPU limit {cpu} s reached? raise it with %%run --cpu {2 * cpu} or %limits --cpu {2 * cpu}"
    if sig == _signal.SIGXFSZ:
        return "file-size limit reached? a file the program wrote grew past the largest a run may write"
    if sig in _MEMORY_SIGNALS and limits.memory is not None:
        more = _size(2 * limits.memory)
        text = (f"memory limit {_shown(limits.memory)} reached? (the program's address space: a failed "
                f"allocation traps, and so does a thread whose stack does not fit, each taking several "
                f"MiB) raise it with %%run --memory {more} or %limits --memory {more}")
        if limits.processes is not None and os.geteuid() != 0:
            text += "; threads count as processes too: %%run --processes N"
        return text
    return None


def located(site: TrapSite) -> list[str]:
    """A trap site as traceback lines: the headline in bold, the source line, a red caret."""
    head, *rest = site.render().split("\n")
    *body, caret = rest
    return [f"{BOLD}{head}{RESET}", *body, f"{RED}{caret}{RESET}"]


def judge(result: RunResult, target: StdoutTarget, expect_status: int | None,
          expect_signal: int | None, limits: RunLimits | None = None,
          site: TrapSite | None = None) -> Failure | None:
    """None when the run ended as the cell expects; else the error to publish (with ``limits``,
    the run's, naming a limit that plausibly ended it; with ``site``, the trap site that fired:
    its check and place, the source line and a caret)."""
    failure = _judged(result, target, expect_status, expect_signal, site)
    # A trap located at a check no limit can fail (an overflow, an index) needs no limit's hint.
    memory_bound = site is None or site.kind in (TrapKind.ALLOCATION, TrapKind.CHECK)
    hint = limit_hint(result, limits) if failure is not None and memory_bound else None
    if hint is not None:
        assert failure is not None
        failure.traceback.append(hint)
    return failure


def _judged(result: RunResult, target: StdoutTarget, expect_status: int | None,
            expect_signal: int | None, site: TrapSite | None = None) -> Failure | None:
    text = summary(result, target)
    detail = text.split("\n")[1:]
    if site is not None:
        detail = [*located(site), *detail]
    if result.interrupted:
        return simple_failure("KeyboardInterrupt", "interrupted: the program was killed; the session is kept", detail)
    if result.timed_out:
        return simple_failure("timed-out", result.describe(), detail)
    if expect_signal is not None:
        if result.signal == expect_signal:
            return None
        return simple_failure("unexpected-outcome",
                              f"expected death by {signal_name(expect_signal)}, but it {result.describe()}", detail)
    if expect_status is not None:
        if result.exit_status == expect_status and result.signal is None:
            return None
        return simple_failure("unexpected-outcome",
                              f"expected exit status {expect_status}, but it {result.describe()}", detail)
    if result.signal is not None:
        if result.signal == _signal.SIGPIPE and target.kind is StdoutKind.BROKEN_PIPE:
            return None
        if result.signal == _signal.SIGILL:
            return simple_failure("trapped", result.describe().removeprefix("trapped: "), detail)
        return simple_failure("killed-by-signal", result.describe(), detail)
    if result.exit_status not in (0, None):
        return simple_failure("exit-status", result.describe(), detail)
    if result.exit_status is None:
        return simple_failure(Rule.INTERNAL, result.describe(), detail)
    return None


# -- definitions and tables ----------------------------------------------------------------------


def defined_text(outcome) -> str:
    """What a cell without `main` added to the session."""
    lines = []
    if outcome.edition is not None:
        lines.append(f"edition {outcome.edition}")
    for imp in outcome.imports:
        lines.append(imp.text)
    replaced = set(outcome.replaced)
    for it in outcome.defined:
        verb = "redefined" if it.qualified in replaced else "defined"
        where = f" (module {it.module})" if it.module else ""
        lines.append(f"{verb} {it.header()}{where}")
    return "\n".join(lines) if lines else "nothing defined"


def who(session) -> tuple[str, str]:
    """``%who``: the session's edition, imports and items as text and as an HTML table."""
    rows = []
    for imp in session.imports.values():
        rows.append((imp.module or "(root)", "import", imp.text))
    for it in session.items.values():
        rows.append((it.module or "(root)", it.kind, it.header()))
    head = f"edition {session.edition}"
    if not rows:
        text = f"{head}; the session has no items"
        return text, f"<p>{html.escape(text)}</p>"
    text = "\n".join([head] + [f"{m}: {d}" for m, _k, d in rows])
    body = "".join(f"<tr><td>{html.escape(m)}</td><td>{html.escape(k)}</td><td><code>{html.escape(d)}</code></td></tr>"
                   for m, k, d in rows)
    table = (f"<p>{html.escape(head)}</p><table><thead><tr><th>module</th><th>kind</th>"
             f"<th>declaration</th></tr></thead><tbody>{body}</tbody></table>")
    return text, table
