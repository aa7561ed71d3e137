"""The text a streamed run publishes (kernel/streaming.py) joined by stream is the text of its
kept bytes decoded whole, wherever the reads cut them: a UTF-8 character cut between two reads
is decoded once, a byte that is not UTF-8 is one replacement character, as before streaming."""

from __future__ import annotations

import random

from cancho_kernel.compiler.backends.live import Output, StreamName
from cancho_kernel.kernel.streaming import StreamText

SAMPLE = "añb€c😀d".encode() + b"\xff\xc3" + "é".encode() + b"\xe2\x82" + b"z\n"


class Shown:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []

    def show(self, stream: str, text: str) -> None:
        self.messages.append((stream, text))

    def joined(self, stream: str) -> str:
        return "".join(t for s, t in self.messages if s == stream)


def published(pieces: list[tuple[StreamName, bytes]], flush_every: int = 1) -> Shown:
    shown = Shown()
    text = StreamText(shown)  # type: ignore[arg-type]
    for k, (stream, data) in enumerate(pieces):
        text.add(Output(stream, data))
        if k % flush_every == 0:
            text.flush()
    text.flush(final=True)
    return shown


def test_every_single_cut_decodes_as_the_whole():
    whole = SAMPLE.decode("utf-8", errors="replace")
    for cut in range(len(SAMPLE) + 1):
        shown = published([(StreamName.STDOUT, SAMPLE[:cut]), (StreamName.STDOUT, SAMPLE[cut:])])
        assert shown.joined("stdout") == whole, cut


def test_random_cuts_of_two_interleaved_streams():
    rng = random.Random(25)
    out, err = SAMPLE * 7, SAMPLE[::-1] * 5  # reversed: invalid sequences of every shape
    for _ in range(300):
        pieces: list[tuple[StreamName, bytes]] = []
        i = j = 0
        while i < len(out) or j < len(err):
            if j >= len(err) or (i < len(out) and rng.random() < 0.5):
                n = rng.randint(1, 6)
                pieces.append((StreamName.STDOUT, out[i:i + n]))
                i += n
            else:
                n = rng.randint(1, 6)
                pieces.append((StreamName.STDERR, err[j:j + n]))
                j += n
        shown = published(pieces, flush_every=rng.randint(1, 5))
        assert shown.joined("stdout") == out.decode("utf-8", errors="replace")
        assert shown.joined("stderr") == err.decode("utf-8", errors="replace")


def test_a_character_left_unfinished_at_the_end_is_one_replacement():
    shown = published([(StreamName.STDOUT, b"ok\xe2\x82")])
    assert shown.joined("stdout") == b"ok\xe2\x82".decode("utf-8", errors="replace") == "ok\ufffd"


def test_what_comes_together_goes_out_as_one_message_per_stream_run():
    shown = Shown()
    text = StreamText(shown)  # type: ignore[arg-type]
    for data in (b"a", b"b", b"c"):
        text.add(Output(StreamName.STDOUT, data))
    text.add(Output(StreamName.STDERR, b"e"))
    text.add(Output(StreamName.STDOUT, b"d"))
    text.flush(final=True)
    assert shown.messages == [("stdout", "abc"), ("stderr", "e"), ("stdout", "d")]


def test_what_a_run_kept_without_emitting_is_shown_at_its_end():
    """Regression: under load the library's strict run lost a cell's whole stdout (nbval:
    "Missing output fields: {'stdout'}") — the cell was marked streamed, so its kept bytes were
    not published again. Whatever a run kept beyond what its channel delivered is shown when it
    ends, after what was delivered, so the cell's text is every kept byte, once."""
    from cancho_kernel.compiler.backends.live import LiveRun
    from cancho_kernel.kernel.streaming import show_unshown, watch

    shown = Shown()
    shown.interactive = False  # type: ignore[attr-defined]
    live = LiveRun()

    def work(cancel):
        live.emit(StreamName.STDOUT, b"first ")  # emitted, then more kept without a word
        return b"first second\n"

    waited, taken = watch(work, live, shown)  # type: ignore[arg-type]
    assert taken[StreamName.STDOUT] == len(b"first ") and taken[StreamName.STDERR] == 0
    show_unshown(shown, {StreamName.STDOUT: waited.value, StreamName.STDERR: b"late\n"}, taken)  # type: ignore[arg-type]
    assert shown.joined("stdout") == "first second\n"
    assert shown.joined("stderr") == "late\n"
    show_unshown(shown, {StreamName.STDOUT: waited.value}, {StreamName.STDOUT: len(waited.value)})  # type: ignore[arg-type]
    assert shown.joined("stdout") == "first second\n"  # nothing shown twice
