"""Smoke tests of benchmarks/cell_latency.py: each section runs once and yields well-formed
numbers (never a time threshold), and the helpers that read results are exact."""

from __future__ import annotations

import math

import pytest

from benchmarks import cell_latency as cl


def test_std_cell_text_follows_its_constant():
    assert "return n * 7;" in cl.std_cell(7)
    assert cl.std_expected(7) == "sum 315\n"


def test_bench_walls_found_in_nested_metadata():
    meta = [{}, {"cancho": {"bench": {"items": [
        {"backend": "jit", "samples": {"wall_ms": [1, 2.5]}},
        {"backend": "exe", "samples": {"wall_ms": [3]}}]}}}]
    assert cl._bench_walls(meta) == {"jit": [1.0, 2.5], "exe": [3.0]}
    assert cl._bench_walls([{"items": "not a list"}]) == {}


def test_well_formed_catches_bad_numbers_and_failed_sections():
    good = {"empty_main": {"status": "ok", "wall_ms": {"jit": {"n": 2, "median": 1.0, "min": 0.5, "max": 2.0}}},
            "profile": {"status": "skipped"}, "kernel": {"status": "skipped"}}
    assert cl.well_formed(good) == []
    bad = {"empty_main": {"status": "ok", "wall_ms": {"jit": {"n": 2, "median": math.nan, "min": 0.5, "max": 2.0}}},
           "profile": {"status": "failed", "reason": "x"}, "kernel": {"status": "ok"}}
    problems = cl.well_formed(bad)
    assert any("not finite" in p for p in problems)
    assert any(p.startswith("profile: failed") for p in problems)


def _check_summary(s: dict) -> None:
    assert s["n"] >= 1 and 0 <= s["min"] <= s["median"] <= s["max"] and math.isfinite(s["max"])


def test_empty_main_section_runs():
    doc = cl.measure_empty_main(2)
    assert doc["status"] == "ok", doc
    assert set(doc["wall_ms"]) == {"jit", "jit (Python child)", "exe", "C (cc -O2)"}
    for s in (*doc["wall_ms"].values(), *doc["round_trip_ms"].values()):
        _check_summary(s)
    assert doc["worker_memory"]["jit worker"]["rss_kib"] > 0


def test_profile_section_runs():
    doc = cl.profile_std_cell(1)
    assert doc["status"] == "ok", doc
    assert list(doc["step_ms"]) == ["parse", "check", "lower", "O2", "MCJIT", "run"]
    for s in doc["step_ms"].values():
        _check_summary(s)
    assert abs(sum(doc["share"].values()) - 1) < 1e-9
    _check_summary(doc["parse_cell_only_ms"])


def test_kernel_section_runs():
    doc = cl.measure_kernels(starts=1, runs=1)
    if doc["status"] == "unavailable":
        pytest.skip(doc["reason"])
    assert doc["status"] == "ok", doc
    _check_summary(doc["ready_ms"])
    for s in (*doc["hello_ms"].values(), *doc["std_ms"].values()):
        _check_summary(s)
    assert set(doc["bench_empty_main_wall_ms"]) == {"jit", "exe"}
    idle = doc["memory"][0]["idle"]
    assert idle["status"] == "ok" and idle["kernel"]["rss_kib"] > 0
    assert cl.well_formed({"kernel": doc}) == []
    assert "start to ready" in cl.format_table({"kernel": doc})
