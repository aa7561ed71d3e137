"""The run model's live channel (backends/live.py) under the shared supervision loop, without a
kernel: what it hands on is exactly what the run keeps, and an interactive stdin is asked for
only when a process of the run blocks reading it (backends/stdin_watch.py), plain and inside
safe mode's sandbox. The programs are shell scripts run as the exe backend runs a binary."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cancho_kernel.compiler import policy
from cancho_kernel.compiler.backends.live import InputWanted, LiveRun, Output, StreamName
from cancho_kernel.compiler.backends.process import RunLimits, RunResult, StdoutTarget, run_executable

SH = "/bin/sh"


@pytest.fixture(scope="module")
def safe_limits(tmp_path_factory) -> RunLimits:
    plan = policy.plan_for(tmp_path_factory.mktemp("home").resolve())
    assert plan.sandbox is not None, plan.warning
    return plan.caps().bound(RunLimits(timeout=60))


@pytest.fixture(params=["plain", "safe"])
def limits(request) -> RunLimits:
    if request.param == "plain":
        return RunLimits(timeout=60)
    return request.getfixturevalue("safe_limits")


class Viewer:
    """Takes the run's events in a thread of its own, answering input requests in turn."""

    def __init__(self, live: LiveRun, answers: list[bytes | None]) -> None:
        self.live, self.answers = live, list(answers)
        self.outputs: list[Output] = []
        self.asked = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            event = self.live.next_event(0.05)
            if isinstance(event, Output):
                self.outputs.append(event)
            elif isinstance(event, InputWanted):
                self.asked += 1
                self.live.answer(self.answers.pop(0) if self.answers else None)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        while (event := self.live.next_event(0)) is not None:
            if isinstance(event, Output):
                self.outputs.append(event)

    def joined(self, stream: StreamName) -> bytes:
        return b"".join(o.data for o in self.outputs if o.stream is stream)


def run_sh(script: str, limits: RunLimits, live: LiveRun, answers=(), stdin: bytes = b"") -> tuple[RunResult, Viewer]:
    viewer = Viewer(live, list(answers))
    try:
        result = run_executable(SH, [SH, "-c", script], stdin, StdoutTarget.pipe(), limits, live=live)
    finally:
        viewer.finish()
    return result, viewer


def test_what_is_handed_on_is_what_is_kept(limits):
    script = "yes x | head -c 300000; echo err >&2; echo tail"
    small = RunLimits(**{**limits.__dict__, "max_output": 100_000})
    result, viewer = run_sh(script, small, LiveRun())
    assert result.stdout_total == 300_005 and result.stdout_truncated
    assert viewer.joined(StreamName.STDOUT) == result.stdout and len(result.stdout) == 100_000
    assert viewer.joined(StreamName.STDERR) == result.stderr == b"err\n"
    assert viewer.asked == 0


def test_each_answer_reaches_the_reader_and_none_is_end_of_file(limits):
    script = 'read a; echo "got $a"; read b; echo "got $b"; cat; echo end'
    result, viewer = run_sh(script, limits, LiveRun(interactive=True), [b"x\n", b"y z\n", b"rest\n", None])
    assert result.exit_status == 0, result
    assert result.stdout == b"got x\ngot y z\nrest\nend\n"
    assert viewer.asked == 4  # read, read, cat's read, cat's read that gets end of file


def test_given_stdin_comes_first_then_the_user(limits):
    result, viewer = run_sh("cat", limits, LiveRun(interactive=True), [b"typed\n", None], stdin=b"given\n")
    assert result.stdout == b"given\ntyped\n" and viewer.asked == 2


def test_a_program_that_never_reads_is_never_asked(limits):
    result, viewer = run_sh("sleep 0.3; echo done", limits, LiveRun(interactive=True), [b"never\n"])
    assert result.stdout == b"done\n" and viewer.asked == 0


def test_a_reader_started_by_the_program_is_seen(limits):
    """The reader is a grandchild (`sh` → `sh` → `head`): the tree is walked, wherever it sits."""
    result, viewer = run_sh("sh -c 'head -n 1'", limits, LiveRun(interactive=True), [b"deep\n"])
    assert result.stdout == b"deep\n" and viewer.asked == 1


def test_without_interaction_stdin_is_end_of_file_at_once(limits):
    result, viewer = run_sh("cat; echo eof", limits, LiveRun(interactive=False), [b"never\n"])
    assert result.stdout == b"eof\n" and viewer.asked == 0


def test_a_kill_while_it_waits_ends_the_run(limits):
    """The cancel event (the stop button) while a read waits for the user: the run ends."""
    live = LiveRun(interactive=True)
    cancel = threading.Event()
    outputs: list[object] = []

    def view() -> None:
        while (event := live.next_event(30)) is not None:
            outputs.append(event)
            if isinstance(event, InputWanted):
                cancel.set()  # never answered
                return

    t = threading.Thread(target=view, daemon=True)
    t.start()
    result = run_executable(SH, [SH, "-c", "read a; echo never"], b"", StdoutTarget.pipe(), limits,
                            cancel, live=live)
    t.join(timeout=30)
    assert result.interrupted and result.stdout == b""
    assert any(isinstance(e, InputWanted) for e in outputs)


def test_an_unanswered_wait_ends_at_the_bound_then_the_timeout_applies(monkeypatch):
    """A frontend that allows input and never answers: the wait for the user does not count
    towards the timeout only up to its bound (here 0.3 s instead of ten minutes)."""
    from cancho_kernel.compiler.backends import process

    monkeypatch.setattr(process, "_USER_WAIT", 0.3)
    live = LiveRun(interactive=True)
    result = run_executable(SH, [SH, "-c", "read a; echo never"], b"", StdoutTarget.pipe(),
                            RunLimits(timeout=0.2), live=live)
    assert result.timed_out and result.stdout == b""
    assert isinstance(live.next_event(0), InputWanted)
