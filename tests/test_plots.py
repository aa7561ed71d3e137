"""A bench plot a person can read (issue 23, item 5; cancho_kernel/kernel/plots.py): the titles
never overlap or leave the figure, with one program as with six; names that do not fit their slot
are wrapped so tick labels never collide; each axis ends above its tallest whisker and the ratio
written over it; the CPU panel, the measure a claim judges, carries its own ratios and the claim;
and the image's alt text says what it shows: the programs, their times and ratios, each claim.
"""

from __future__ import annotations

import base64
import itertools
import re

import pytest

from cancho_kernel.kernel import plots

LONG = ["base64_before", "base64_after", "C gnu_base64"]
SIX = ["write_bytes_through_the_buffer", "fill_then_flush", "C fill_with_memset_and_fwrite", "C fwrite",
       "ffi_write_direct_to_libc", "averylongidentifierwithoutanybreaksatall"]


def _summary(xs: list[float]) -> dict:
    s = sorted(xs)
    return {"median": s[len(s) // 2], "min": s[0], "max": s[-1], "n": len(s)}


def _doc(labels: list[str], claims: list[dict] | None = None) -> dict:
    """A bench document as bench.document writes it: per program its runs, summaries, ratios."""
    items = []
    first = None
    for i, label in enumerate(labels):
        wall = [30.0 / (i + 1) * f for f in (1.0, 1.05, 1.2)]     # a wide whisker on top
        user = [w * 0.7 for w in wall]
        system = [w * 0.1 for w in wall]
        first = first or wall
        items.append({
            "label": label, "ref": label, "kind": "c" if label.startswith("C ") else "cancho", "backend": "exe",
            "origin": None, "args": [], "stdin_bytes": 0,
            "build": {"compile_ms": 1.0, "link_ms": 1.0, "mcjit_ms": None},
            "wall_ms": _summary(wall), "user_ms": _summary(user), "sys_ms": _summary(system),
            "peak_rss_kib": _summary([1000.0, 1010.0, 1020.0]),
            "ratio": _summary([w / f for w, f in zip(wall, first)]),
            "samples": {"wall_ms": wall, "user_ms": user, "sys_ms": system, "peak_rss_kib": [1000.0] * 3,
                        "mcjit_ms": []},
        })
    doc = {"schema": 1, "runs": 3, "warmup": 1, "interleaved": True, "stdout": "/dev/null", "stdout_how": None,
           "expect_status": 0, "items": items}
    if claims:
        doc["claims"] = claims
    return doc


CASES = {
    "one": _doc(["base64_before"]),
    "three long names": _doc(LONG),
    "six, with a claim": _doc(SIX, [{"claim": f"{SIX[0]} / C:fwrite < 2", "ratio": 1.02, "holds": True}]),
    "two, with claims": _doc(["fasta", "C fasta_putchar"], [
        {"claim": "fasta / C:fasta_putchar < 2", "ratio": 0.78, "holds": True},
        {"claim": "fasta / C:fasta_putchar > 0.1", "ratio": 0.78, "holds": True}]),
}


def _drawn(doc: dict):
    fig = plots.figure(doc)
    fig.canvas.draw()
    return fig, fig.canvas.get_renderer()


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("doc", CASES.values(), ids=CASES.keys())
def test_titles_neither_overlap_nor_leave_the_figure(doc):
    fig, r = _drawn(doc)
    titles = [fig._suptitle] + [ax.title for ax in fig.axes]
    boxes = [t.get_window_extent(r) for t in titles if t is not None and t.get_text()]
    assert len(boxes) == 3
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b), (a, b)
    whole = fig.bbox
    texts = [t for t in fig.findobj(lambda o: hasattr(o, "get_text") and hasattr(o, "get_window_extent"))
             if t.get_visible() and t.get_text()]
    for t in texts:
        box = t.get_window_extent(r)
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1, t.get_text()


@pytest.mark.parametrize("doc", CASES.values(), ids=CASES.keys())
def test_tick_labels_do_not_collide(doc):
    fig, r = _drawn(doc)
    for ax in fig.axes:
        boxes = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_text()]
        assert len(boxes) == len(doc["items"])
        for a, b in itertools.combinations(boxes, 2):
            assert not _overlap(a, b), (a, b)


@pytest.mark.parametrize("doc", CASES.values(), ids=CASES.keys())
def test_each_axis_has_headroom_above_its_tallest_whisker_and_ratio(doc):
    fig, r = _drawn(doc)
    wall_ax, cpu_ax = fig.axes
    for ax, measure in ((wall_ax, plots.wall(doc)), (cpu_ax, plots.cpu(doc))):
        assert ax.get_ylim()[1] > max(measure.high) * 1.1
        inside = ax.get_window_extent(r)
        ratios = [t for t in ax.texts if t.get_text().endswith("×")]
        assert len(ratios) == len(doc["items"])          # the CPU panel has its ratios too
        for t in ratios:
            assert t.get_window_extent(r).y1 <= inside.y1, t.get_text()


def test_the_cpu_panel_shows_what_a_claim_judges():
    doc = CASES["two, with claims"]
    fig, _ = _drawn(doc)
    title = " ".join(fig.axes[1].get_title().split())
    assert "CPU time" in title and "what --claim judges" in title
    assert "fasta / C:fasta_putchar < 2: 0.78 holds" in title
    # the CPU ratio is paired per round on user + sys, as the claim computes it
    cpu = plots.cpu(doc)
    assert cpu.ratio[0] == 1.0 and cpu.ratio[1] == pytest.approx(0.5)


def test_long_names_are_wrapped_at_their_separators():
    assert plots.tick_label("base64_before", 20) == "base64_before"
    assert plots.tick_label("base64_before", 8) == "base64_\nbefore"
    assert plots.tick_label("C gnu_base64", 8) == "C gnu_\nbase64"
    assert all(len(line) <= 8 for line in plots.tick_label("averylongidentifierwithoutbreaks", 8).split("\n"))


def test_the_alt_text_names_programs_times_and_ratios():
    doc = CASES["six, with a claim"]
    alt = plots.displays(doc).plot.metadata["image/png"]["alt"]
    for label in SIX:
        assert label in alt
    assert "0.50× first" in alt and "1.00× first" in alt
    assert "Wall time" in alt and "CPU time (user + sys)" in alt
    assert f"Claim {SIX[0]} / C:fwrite < 2 (CPU time): 1.02, holds." in alt
    shown = plots.displays(doc).plot
    assert base64.b64decode(shown.data["image/png"]).startswith(b"\x89PNG")
    assert not re.search(r"\d", shown.data["text/plain"].replace("base64", ""))  # nbval compares it: no figure
