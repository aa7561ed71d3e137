"""`%%fmt`, `%layout` and `%ids` (kernel/tools_view.py): in-process through the directive table,
and `%%fmt`'s cell replacement through a real kernel's execute_reply."""

from __future__ import annotations

import pytest

from cancho_kernel.kernel import directives
from cancho_kernel.kernel import presentation as P
from cancho_kernel.kernel.options import Settings
from cancho_kernel.kernel.session import Session
from kernel_client import run, started_kernel

MESSY = "// a comment\nfn f(a:int)->[] int{return (a)+0x10;}\n"
TIDY = "// a comment\nfn f(a: int) -> [] int {\n    return a + 0x10;\n}\n"


class Ctx:
    """A cell's context as the kernel builds it, keeping what would be published."""

    def __init__(self, session: Session) -> None:
        self.session, self.settings, self.runner = session, Settings(), None
        self.failed = False
        self.failure: P.Failure | None = None
        self.texts: list[str] = []
        self.payload: list[dict] = []

    def stream(self, name: str, text: str) -> None:
        self.texts.append(text)

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self.texts.append(data.get("text/plain", ""))

    def update(self, data: dict, metadata: dict | None = None, *, display_id: str) -> None:
        self.display(data)

    def result(self, data: dict, metadata: dict | None = None) -> None:
        self.display(data)

    def fail(self, failure: P.Failure) -> None:
        self.failed, self.failure = True, failure
        self.texts.append(failure.evalue)

    def page(self, text: str) -> None:
        self.texts.append(text)

    def clear(self) -> None:
        pass


def cell(session: Session, code: str) -> Ctx:
    ctx = Ctx(session)
    directives.execute(ctx, code, "cell[1]")
    return ctx


def test_fmt_shows_the_diff_and_replaces_the_cell_only_when_asked():
    """Regression: a replacing payload from every %%fmt cell made JupyterLab's Run All rewrite
    whichever cell was current (the formatting notebook failed in the browser suite)."""
    plain = cell(Session(), "%%fmt\n" + MESSY)
    assert not plain.failed and plain.payload == [] and "+    return a + 0x10;" in plain.texts[0]
    assert cell(Session(), "%%fmt --bogus\n" + MESSY).failed
    s = Session()
    ctx = cell(s, "%%fmt --replace\n" + MESSY)
    assert not ctx.failed, ctx.texts
    assert "-fn f(a:int)->[] int{return (a)+0x10;}" in ctx.texts[0] and "+    return a + 0x10;" in ctx.texts[0]
    assert ctx.payload == [{"source": "set_next_input", "text": TIDY.rstrip("\n"), "replace": True}]
    assert not s.items
    again = cell(s, "%%fmt --replace\n" + TIDY)
    assert again.texts == ["already in the canonical layout"] and again.payload == []


def test_fmt_of_a_cell_that_does_not_parse_is_a_located_refusal():
    ctx = cell(Session(), "%%fmt\nfn f( -> [] int {}\n")
    assert ctx.failed and ctx.payload == []
    assert "cell[" in "".join(ctx.failure.traceback) and ":2:" in "".join(ctx.failure.traceback)


def test_layout_and_ids_report_on_the_session():
    s = Session()
    assert not cell(s, "struct Rgb { r: byte, g: byte, b: byte }\nfn twice(n: int) -> [] int { return n * 2; }").failed
    lay = cell(s, "%layout Rgb")
    assert not lay.failed, lay.texts
    assert lay.texts[0].splitlines()[0].startswith("type") and lay.texts[0].splitlines()[1].startswith("Rgb ")
    assert "no non-generic struct or enum `Nope`" in cell(s, "%layout Nope").texts[-1]
    ids = cell(s, "%ids")
    rows = [line.split()[:2] for line in ids.texts[0].splitlines()]
    assert rows == [["type", "Rgb"], ["sig", "twice"], ["body", "twice"]]
    assert cell(s, "%ids\nfn g() -> [] int { return 1; }").failed  # a report on the session: a cell of its own


@pytest.fixture(scope="module")
def kernel():
    yield from started_kernel()


def test_fmt_reaches_the_frontend_as_a_replacing_set_next_input(kernel):
    out = run(kernel, "%%fmt --replace\n" + MESSY)
    assert out.status == "ok", out.error
    assert out.reply["content"]["payload"] == [
        {"source": "set_next_input", "text": TIDY.rstrip("\n"), "replace": True}]
