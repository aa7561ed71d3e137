"""A run shown while it runs: the kernel's main thread waits for the run's thread and, while it
waits, publishes what the program writes and answers its reads of standard input.

Why here and not in the run's thread: the frontend's messages (``stream`` on iopub,
``input_request`` on stdin) are sent by the thread that owns the kernel's sockets, and an
interrupt (SIGINT, ``KeyboardInterrupt``) arrives in this thread. The run's thread only puts
records on the run's channel (``compiler/backends/live.py``).

What a notebook keeps is what it kept before output was streamed: each stream's text is the
run's kept bytes decoded as UTF-8 with replacement, by an incremental decoder (a character cut
between two reads is decoded whole, once), so the concatenation of a stream's messages is the
text a finished run would publish, and nbval (which joins a cell's stream outputs by name)
compares the same text. Messages are gathered for :data:`GATHER` seconds at most, so a program
that flushes every line does not send one message per line, and no output is later than that
after it was read.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from ..compiler.backends.live import Ended, InputWanted, LiveRun, Output, StreamName
from ..compiler.run import Waited, start_work

T = TypeVar("T")

GATHER = 0.02  # seconds: output read within this time goes out as one message per stream
_TICK = 0.05   # seconds: how often the wait looks at the run when nothing comes


class LiveView(Protocol):
    """Where a watched run is shown (the kernel's cell)."""

    interactive: bool  # the frontend accepts input requests and the cell gave no stdin

    def show(self, stream: str, text: str) -> None:
        """Publish ``text`` on ``stream`` (``stdout``/``stderr``)."""

    def ask(self, over: Callable[[], bool]) -> bytes | None:
        """One line from the user (with its newline), or None for end of file; gives up (None)
        when ``over()`` becomes true. May raise KeyboardInterrupt."""


class StreamText:
    """Decodes each stream's bytes as they come and publishes them, gathered by stream."""

    def __init__(self, view: LiveView) -> None:
        self.view = view
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for name in StreamName}
        self._pending: list[tuple[StreamName, str]] = []
        self._since: float | None = None
        self.taken = {name: 0 for name in StreamName}  # bytes of each stream taken to be shown

    def add(self, output: Output) -> None:
        self.taken[output.stream] += len(output.data)
        text = self._decoders[output.stream].decode(output.data)
        if not text:
            return
        if self._pending and self._pending[-1][0] is output.stream:
            self._pending[-1] = (output.stream, self._pending[-1][1] + text)
        else:
            self._pending.append((output.stream, text))
        if self._since is None:
            self._since = time.monotonic()

    @property
    def gathering(self) -> bool:
        return self._since is not None

    def due(self) -> bool:
        return self._since is not None and time.monotonic() - self._since >= GATHER

    def flush(self, final: bool = False) -> None:
        """Publish what is gathered (with ``final``, also a character left unfinished)."""
        if final:
            for name, decoder in self._decoders.items():
                rest = decoder.decode(b"", final=True)
                if rest:
                    self._pending.append((name, rest))
        while self._pending:  # one at a time: an interrupt between two sends repeats none
            name, text = self._pending.pop(0)
            self.view.show(name.value, text)
        self._since = None


def watch(work: Callable[[threading.Event], T], live: LiveRun, view: LiveView,
          name: str = "cancho-run") -> tuple[Waited[T], dict[StreamName, int]]:
    """Run ``work(cancel)`` in a helper thread and wait for it, as :func:`run.interruptible`
    does (an interrupt sets ``cancel``, the wait goes on until the work ends), publishing the
    run's output and answering its input requests meanwhile. Also answers how many bytes of
    each stream were shown, so a caller can show what a run kept but never emitted
    (:func:`show_unshown`)."""
    cancel, done, box = start_work(work, name, then=live.end)
    text = StreamText(view)
    interrupted = False
    while True:
        try:
            if _serve(live, view, text, done, cancel):
                break
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
            live.answer(None)
    text.flush(final=True)
    return Waited(box.get("value"), box.get("error"), interrupted), text.taken  # type: ignore[arg-type]


def show_unshown(view: LiveView, kept: dict[StreamName, bytes], shown: dict[StreamName, int]) -> None:
    """Publish the part of each stream's kept bytes that was never shown while the run ran (a
    run path that keeps its output without emitting it): the cell ends with every kept byte."""
    for name, data in kept.items():
        rest = data[shown.get(name, 0):]
        if rest:
            view.show(name.value, rest.decode("utf-8", errors="replace"))


def _serve(live: LiveRun, view: LiveView, text: StreamText, done: threading.Event,
           cancel: threading.Event) -> bool:
    """One turn of the wait; True once the run has ended and every event was taken (the run's
    :class:`Ended` comes after all it emitted)."""
    finished = False
    event = live.next_event(0 if done.is_set() else GATHER if text.gathering else _TICK)
    while event is not None:
        if isinstance(event, Ended):
            finished = True
        elif isinstance(event, Output):
            text.add(event)
        elif isinstance(event, InputWanted) and not cancel.is_set():
            text.flush()
            live.answer(view.ask(done.is_set))
        if finished or (text.due() and not done.is_set()):
            break
        event = live.next_event(0)
    finished = finished or (event is None and done.is_set())  # all it emitted precedes `done`
    if text.due() or finished:
        text.flush()
    return finished
