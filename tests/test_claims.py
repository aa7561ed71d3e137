"""Claims and figures judged against bench documents built by hand: the verdicts, the factor,
the one metadata shape the library's index reads (``metadata["cancho"]["statements"]``), and
text/plain lines that carry no measured number."""

from __future__ import annotations

import math

import pytest

from cancho_kernel.kernel import claims as C
from cancho_kernel.kernel import plots

KEYS = {"kind", "text", "value", "document", "verdict", "factor"}


def _item(label: str, ref: str | None, cpu_ms: list[float]) -> dict:
    return {"label": label, "ref": ref, "kind": "c" if (ref or "").startswith("C:") else "cancho",
            "samples": {"user_ms": list(cpu_ms), "sys_ms": [0.0] * len(cpu_ms)}}


def _doc(a: list[float], b: list[float]) -> dict:
    return {"items": [_item("a", "a", a), _item("C b", "C:b", b)]}


def _shape(record: dict) -> None:
    """The contract: exactly these keys, these types, these verdicts."""
    assert set(record) == KEYS
    assert record["kind"] in ("claim", "figure") and isinstance(record["text"], str)
    assert record["value"] is None or isinstance(record["value"], float)
    assert record["verdict"] in (("held", "failed") if record["kind"] == "claim" else ("holds", "differs"))
    for key in ("document", "factor"):
        assert record[key] is None or isinstance(record[key], float)
    if record["kind"] == "claim":
        assert record["document"] is None and record["factor"] is None
    else:
        assert isinstance(record["document"], float)


def test_paired_median_of_cpu_time():
    doc = _doc([30, 20, 10], [10, 10, 10])  # paired ratios 3, 2, 1
    assert C.paired_ratio(doc, "a", "C:b") == 2.0
    assert C.paired_ratio(doc, "a", "C b") == 2.0


@pytest.mark.parametrize(("text", "verdict"), [("a / C:b < 2.5", "held"), ("a / C:b > 2.5", "failed"),
                                                ("a / C:b <= 2", "held"), ("a / C:b >= 2.01", "failed")])
def test_a_claim_holds_or_fails(text, verdict):
    (s,) = C.judge([C.parse_claim(text)], _doc([30, 20, 10], [10, 10, 10]))
    assert s.record()["verdict"] == verdict and s.failed == (verdict == "failed")
    _shape(s.record())


@pytest.mark.parametrize(("document", "verdict"), [("2.0", "holds"), ("1.34", "holds"), ("2.99", "holds"),
                                                    ("1.33", "differs"), ("3.01", "differs"), ("0.5", "differs")])
def test_a_figure_holds_within_one_and_a_half_times_and_never_fails(document, verdict):
    (s,) = C.judge([C.parse_figure(f"a / C:b ~ {document}")], _doc([30, 20, 10], [10, 10, 10]))
    rec = s.record()
    _shape(rec)
    assert rec["verdict"] == verdict and not s.failed
    assert rec["document"] == float(document) and rec["factor"] == pytest.approx(2.0 / float(document))
    assert rec["text"] == f"a / C:b ~ {document}"


def test_no_claim_failed_means_no_failure_message_figures_included():
    judged = C.judge([C.parse_figure("a / C:b ~ 100"), C.parse_claim("a / C:b < 3")], _doc([20], [10]))
    assert C.failure_message(judged) is None
    judged = C.judge([C.parse_claim("a / C:b < 1")], _doc([20], [10]))
    assert "a / C:b < 1 does not hold" in C.failure_message(judged)


def test_an_unmeasurable_ratio_is_recorded_as_null_not_infinity():
    (s,) = C.judge([C.parse_figure("a / C:b ~ 1")], _doc([20], [0]))
    assert math.isinf(s.value) and s.record()["value"] is None and s.record()["factor"] is None
    assert "∞" in C.html_note(s.record())


def test_text_plain_is_the_same_whatever_was_measured():
    lines = set()
    for a in ([10], [20], [90]):
        doc = {"runs": 1, **_doc(a, [10])}
        doc["statements"] = [s.record() for s in C.judge([C.parse_figure("a / C:b ~ 1.30")], doc)]
        lines.add(plots.plain(doc))
    assert lines == {"bench: a vs C b, 1 run each\nfigure a / C:b (document 1.30): shown in the table"}


@pytest.mark.parametrize("bad", ["a / b", "a < 2", "a / b ~", "a / b ~ 0", "a / b ~ -1", "a / b ~ x"])
def test_a_figure_that_cannot_be_read_is_refused(bad):
    with pytest.raises(C.ClaimError, match="--figure"):
        C.parse_figure(bad)


def test_a_statement_naming_an_unknown_program_is_refused_before_measuring():
    with pytest.raises(C.ClaimError, match="--figure `a / nobody ~ 2`: no program `nobody`"):
        C.check_names([C.parse_figure("a / nobody ~ 2")], [("a", "a"), ("C b", "C:b")])
