"""A run's live channel: what the program writes as it arrives, and standard input as the
user types it, between the supervision loop (:func:`process.pump`, in the run's thread) and
whoever shows the run (the kernel's main thread, ``kernel/streaming.py``).

Why a channel and not a callback: the pump must never wait on the frontend (a slow browser
would stall the program's pipes), and the frontend's messages must be sent from the thread
that owns the kernel's sockets. So the pump only puts records on a queue and takes answers
from another; both sides are non-blocking for the pump.

What reaches the channel is exactly what the run keeps: the first ``max_output`` bytes of each
stream, in the order read, so the concatenation of a stream's :class:`Output` records is the
run's ``RunResult.stdout`` (or ``stderr``) byte for byte.

Standard input (``interactive``): the program's stdin is a pipe the pump keeps open. When a
process of the run blocks reading that pipe while it is empty (:mod:`stdin_watch`), the pump
puts one :class:`InputWanted` and waits for one answer: a line (its bytes, the newline
included) or end of file (``None``), after which the pipe is closed.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from enum import Enum


class StreamName(str, Enum):
    """The program's output streams, named as Jupyter's ``stream`` messages name them."""

    STDOUT = "stdout"
    STDERR = "stderr"


@dataclass(frozen=True)
class Output:
    """Bytes the program wrote to one stream (kept bytes only, in the order read)."""

    stream: StreamName
    data: bytes


@dataclass(frozen=True)
class InputWanted:
    """A process of the run is blocked reading its empty standard input."""


@dataclass(frozen=True)
class Ended:
    """The run's thread has returned: nothing more will come (wakes the viewer at once)."""


LiveEvent = Output | InputWanted | Ended


@dataclass(frozen=True)
class Answer:
    """What the user gave for one :class:`InputWanted`: ``data`` to write, or end of file."""

    data: bytes | None

    @property
    def eof(self) -> bool:
        return self.data is None


class LiveRun:
    """The channel of one run. ``interactive``: the program's stdin is fed from the user (the
    run was given no ``--stdin``, and the frontend accepts input requests)."""

    def __init__(self, interactive: bool = False) -> None:
        self.interactive = interactive
        self._events: queue.SimpleQueue[LiveEvent] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[Answer] = queue.SimpleQueue()
        self.asking = False  # an InputWanted is out and not yet answered

    # -- the pump's side (never blocks) ------------------------------------------------------

    def emit(self, stream: StreamName, data: bytes) -> None:
        if data:
            self._events.put(Output(stream, bytes(data)))

    def want_input(self) -> None:
        """Ask once; further asks wait for the answer."""
        if not self.asking:
            self.asking = True
            self._events.put(InputWanted())

    def take_answer(self) -> Answer | None:
        """The user's answer, if one came."""
        try:
            answer = self._answers.get_nowait()
        except queue.Empty:
            return None
        self.asking = False
        return answer

    def end(self) -> None:
        """Said once by the run's thread when it returns, after everything it emitted."""
        self._events.put(Ended())

    # -- the viewer's side ---------------------------------------------------------------------

    def next_event(self, timeout: float | None) -> LiveEvent | None:
        """The next event, waiting at most ``timeout`` seconds (0: only one already there)."""
        try:
            if timeout is not None and timeout <= 0:
                return self._events.get_nowait()
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def answer(self, data: bytes | None) -> None:
        """Give the program a line (``data``) or end of file (``None``)."""
        self._answers.put(Answer(data))
