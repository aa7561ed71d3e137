"""Smoke test of benchmarks/build_cache.py: one example built cold (and warm when the CLI has a
build cache) yields well-formed numbers; never a time threshold."""

from __future__ import annotations

from benchmarks import build_cache


def test_one_example_cold_and_warm():
    doc = build_cache.measure(1, only=["examples/hello.cho"])
    assert doc["status"] == "ok", doc
    assert [row["program"] for row in doc["rows"]] == ["examples/hello.cho"]
    row = doc["rows"][0]
    assert row["status"] == "ok", row
    assert row["cold_ms"]["n"] == 1 and row["cold_ms"]["median"] > 0
    assert ("warm_ms" in row) == doc["cache"]
    assert build_cache.well_formed(doc) == []
    assert "examples/hello.cho" in build_cache.format_table(doc)


def test_well_formed_reports_failures_and_missing_warm_rows():
    doc = {"status": "ok", "cache": True, "rows": [
        {"program": "a", "status": "failed", "reason": "boom"},
        {"program": "b", "status": "ok", "cold_ms": {"n": 1, "median": 5.0, "min": 5.0, "max": 5.0}}]}
    problems = build_cache.well_formed(doc)
    assert problems == ["a: boom", "b: no warm builds although the CLI has a cache"]
