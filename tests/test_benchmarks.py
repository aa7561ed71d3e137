"""Tests of the benchmark harness (``benchmarks/``).

The unmarked tests check the harness's own logic in a few seconds on tiny C programs: statistics,
the interleaved schedule, output verification catching a mismatch, and the JSON document's shape.
The end-to-end test runs ``python -m benchmarks --quick --runs 1`` against the real programs, so it
needs the compiler to build them. The ``bench`` test is the full measurement (excluded by default;
run with ``pytest -m bench``).

No test compares a time with a threshold: the machine is shared and noisy, and a timing assertion
would fail for reasons that have nothing to do with the code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import harness
from benchmarks.harness import Built, RunFailed, RunResult
from benchmarks.programs import PAIRS, Pair, Reference
from benchmarks.report import format_table, validate
from benchmarks.stats import paired_ratios, ratio_summary, summarize
from benchmarks.suite import Config, run_suite
from benchmarks.tools import make_inputs, tool_rows

REPO = Path(__file__).resolve().parent.parent
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")


# ---------------------------------------------------------------- statistics

def test_summarize_odd_and_even_medians() -> None:
    s = summarize([5.0, 1.0, 3.0])
    assert (s.n, s.median, s.min, s.max) == (3, 3.0, 1.0, 5.0)
    assert summarize([4.0, 1.0, 2.0, 3.0]).median == 2.5
    assert summarize([7.0]).median == 7.0
    assert summarize([2.0, 4.0]).scaled(1e-3).median == pytest.approx(3e-3)


def test_summarize_refuses_empty() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_ratio_of_medians_and_paired_ratios() -> None:
    a = [42.0, 44.0, 40.0, 50.0]
    b = [34.0, 33.0, 32.0, 40.0]
    r = ratio_summary(a, b)
    assert r.of_medians == pytest.approx(43.0 / 33.5)
    pairs = [42 / 34, 44 / 33, 40 / 32, 50 / 40]
    assert paired_ratios(a, b) == pytest.approx(pairs)
    assert r.paired_min == pytest.approx(min(pairs))
    assert r.paired_max == pytest.approx(max(pairs))
    assert r.paired_median == pytest.approx(sorted(pairs)[1] / 2 + sorted(pairs)[2] / 2)


def test_paired_ratios_need_equal_lengths_and_positive_denominators() -> None:
    with pytest.raises(ValueError):
        paired_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_ratios([1.0], [0.0])


def test_seed_reference_ratios() -> None:
    """The reference column reproduces the seed's derivations (42.3 / 33.7 = 1.25x)."""
    ref = {p.key: p.reference for p in PAIRS}
    assert ref["putchar"].ratio == pytest.approx(1.255, abs=1e-3)
    assert ref["write_bytes"].ratio == pytest.approx(1.1)
    assert ref["fill"].ratio == pytest.approx(9.2 / 3.0)


# ---------------------------------------------------------------- interleaving

def test_interleaved_schedule_order() -> None:
    order = harness.interleaved_schedule(["A", "B"], runs=3, warmup=1)
    assert order == [("A", True), ("B", True),
                     ("A", False), ("B", False), ("A", False), ("B", False),
                     ("A", False), ("B", False)]
    assert harness.interleaved_schedule(["A"], runs=2, warmup=0) == [("A", False), ("A", False)]
    with pytest.raises(ValueError):
        harness.interleaved_schedule(["A"], runs=0, warmup=0)


def _fake(exit_code: int = 0):
    """A runner that records the call order and returns distinguishable fake timings."""
    calls: list[str] = []

    def runner(v: Built) -> RunResult:
        calls.append(v.name)
        wall = 1_000_000 * len(calls)  # ms = position in the schedule
        return RunResult(wall, 0, 0, 100, exit_code)

    return calls, runner


def test_time_interleaved_records_only_timed_runs_in_order() -> None:
    calls, runner = _fake()
    a, b = Built("A", ("a",)), Built("B", ("b",))
    samples = harness.time_interleaved([a, b], runs=2, warmup=1, runner=runner)
    assert calls == ["A", "B", "A", "B", "A", "B"]
    assert samples["A"].wall_ms() == [3.0, 5.0]  # positions 1 and 2 were the warm-up
    assert samples["B"].wall_ms() == [4.0, 6.0]
    r = harness.compare(samples["A"], samples["B"])
    assert r.of_medians == pytest.approx(4.0 / 5.0)


def test_time_interleaved_refuses_a_failing_run() -> None:
    _, runner = _fake(exit_code=3)
    with pytest.raises(RunFailed):
        harness.time_interleaved([Built("A", ("a",))], runs=1, warmup=0, runner=runner)


# ---------------------------------------------------------------- real processes on tiny C programs

TINY = {
    "same_a": '#include <stdio.h>\nint main(void){for(int i=0;i<100;i++)fputs("abc\\n",stdout);return 0;}\n',
    "same_b": '#include <stdio.h>\nint main(void){for(int i=0;i<100;i++){putchar(97);putchar(98);'
              'putchar(99);putchar(10);}return 0;}\n',
    "different": '#include <stdio.h>\nint main(void){for(int i=0;i<100;i++)fputs("abd\\n",stdout);return 0;}\n',
    "fails": '#include <stdio.h>\nint main(void){fputs("abc\\n",stdout);return 7;}\n',
}


@pytest.fixture(scope="module")
def tiny_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tiny")
    out = {}
    for name, text in TINY.items():
        p = d / f"{name}.c"
        p.write_text(text)
        out[name] = p
    return out


@needs_cc
def test_spawn_measured_reports_exit_code_and_rusage(tiny_sources: dict[str, Path],
                                                     tmp_path: Path) -> None:
    exe = harness.build_c(tiny_sources["fails"], tmp_path / "fails")
    assert exe.build_ms is not None and exe.build_ms > 0
    r = harness.spawn_measured(exe.argv)
    assert r.exit_code == 7
    assert r.wall_ns > 0 and r.user_ns >= 0 and r.sys_ns >= 0 and r.maxrss_kib > 0
    dest = tmp_path / "out.txt"
    harness.spawn_measured(exe.argv, stdout_path=str(dest))
    assert dest.read_bytes() == b"abc\n"


@needs_cc
def test_capture_output_hashes_stdout(tiny_sources: dict[str, Path], tmp_path: Path) -> None:
    import hashlib

    a = harness.build_c(tiny_sources["same_a"], tmp_path / "a")
    b = harness.build_c(tiny_sources["same_b"], tmp_path / "b")
    oa, ob = harness.capture_output(a.argv), harness.capture_output(b.argv)
    assert oa.sha256 == ob.sha256 == hashlib.sha256(b"abc\n" * 100).hexdigest()
    assert (oa.nbytes, oa.exit_code) == (400, 0)


def test_build_error_carries_the_compiler_message(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on PATH")
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return nope; }\n")
    with pytest.raises(harness.BuildError, match="nope"):
        harness.build_c(bad, tmp_path / "bad")


def _tiny_pair(key: str, cancho: Path, c: Path) -> Pair:
    return Pair(key, f"tiny {key}", f"stand-in {key}", f"C {key}", cancho, c,
                Reference(2.0, None, 1.0, None, "test"))


def _tiny_suite(pairs: list[Pair], runs: int = 3) -> dict:
    cfg = Config(runs=runs, warmup=1, pairs=pairs, expected_bytes=400, measure_compile=False,
                 build_cancho=harness.build_c, log=lambda msg: None)
    return run_suite(cfg)


@needs_cc
def test_suite_on_tiny_programs_verifies_times_and_reports(tiny_sources: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """The whole suite, with C programs standing in for the cancho side."""
    doc = _tiny_suite([
        _tiny_pair("equal", tiny_sources["same_b"], tiny_sources["same_a"]),
        _tiny_pair("mismatch", tiny_sources["different"], tiny_sources["same_a"]),
        _tiny_pair("exit", tiny_sources["fails"], tiny_sources["same_a"]),
    ])
    assert validate(doc) == []
    rows = {r["key"]: r for r in doc["rows"]}

    ok = rows["equal"]
    assert ok["status"] == "ok" and ok["outputs_equal"] is True
    for side in ("cancho", "c"):
        t = ok[side]["timing"]
        assert len(t["samples_ms"]) == 3
        w = t["wall_ms"]
        assert w["min"] <= w["median"] <= w["max"] and w["n"] == 3
    r = ok["ratio"]
    assert r["paired_min"] <= r["paired_median"] <= r["paired_max"]
    assert r["of_medians"] == pytest.approx(
        ok["cancho"]["timing"]["wall_ms"]["median"] / ok["c"]["timing"]["wall_ms"]["median"])

    bad = rows["mismatch"]
    assert bad["status"] == "failed" and bad["outputs_equal"] is False
    assert "timing" not in bad["cancho"]
    assert any("differs" in p for p in bad["cancho"]["problems"])
    assert bad["c"]["status"] == "ok" and bad["ratio"] is None  # the C side is still measured

    ex = rows["exit"]
    assert ex["status"] == "failed" and any("exited 7" in p for p in ex["cancho"]["problems"])

    assert doc["compile"]["status"] == "unavailable"
    json.dumps(doc)  # serialisable as is
    table = format_table(doc)
    assert "tiny equal" in table and "Problems:" in table and "differs" in table


@needs_cc
def test_suite_reports_a_build_failure_without_crashing(tiny_sources: dict[str, Path],
                                                        tmp_path: Path) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    doc = _tiny_suite([_tiny_pair("broken", broken, tiny_sources["same_a"])], runs=1)
    assert validate(doc) == []
    row = doc["rows"][0]
    assert row["status"] == "failed" and row["c"]["status"] == "ok"
    assert any("exited" in p for p in row["cancho"]["problems"])
    assert [b["status"] for b in doc["builds"]] == ["ok", "failed"]


def test_validate_rejects_a_malformed_document() -> None:
    assert validate({}) != []
    doc = {"schema": "cancho-bench/1", "created": "x", "settings": {"runs": 1, "warmup": 0,
           "backends": ["exe"]}, "host": {}, "derived": [], "builds": [],
           "compile": {"status": "ok", "ms": {"n": 1, "median": 5, "min": 6, "max": 7}},
           "rows": [{"key": "k", "title": "t", "backend": "exe", "status": "ok", "reference": {},
                     "cancho": {"label": "a", "problems": [], "status": "ok"},
                     "c": {"label": "b", "problems": []}, "ratio": None, "outputs_equal": True}]}
    errs = validate(doc)
    assert any("compile.ms" in e for e in errs)
    assert any("timing" in e for e in errs)
    assert any("ratio" in e for e in errs)


def test_jit_variant_runs_through_the_cli_and_says_it_includes_start_up() -> None:
    v = harness.cancho_jit(Path("benchmarks/programs/putchar_8m.cho"))
    assert list(v.argv) == [sys.executable, "-m", "cancho_kernel.cli", "run", "--backend", "jit",
                            "benchmarks/programs/putchar_8m.cho"]
    assert v.cwd == str(REPO) and v.note is not None and "start-up" in v.note


def test_command_line_refuses_zero_runs() -> None:
    from benchmarks.__main__ import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(["--runs", "0"])
    assert exc.value.code == 2


# ---------------------------------------------------------------- end to end

def test_tool_inputs_are_deterministic_and_sized(tmp_path: Path) -> None:
    import base64 as b64

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    ia, ib = make_inputs(a, quick=True), make_inputs(b, quick=True)
    for key in ia:
        assert ia[key].read_bytes() == ib[key].read_bytes()
    assert ia["random"].stat().st_size == 512 * 1024
    assert b64.decodebytes(ia["encoded"].read_bytes()) == ia["random"].read_bytes()
    assert max(len(x) for x in ia["encoded"].read_bytes().split(b"\n")) == 76
    assert ia["lines"].read_bytes().count(b"\n") == 30_000


def test_a_missing_example_makes_its_row_unavailable(tmp_path: Path, monkeypatch) -> None:
    """examples/ is written by someone else: a missing program is reported, the GNU side still timed."""
    import benchmarks.tools as tools

    monkeypatch.setattr(tools, "BASE64", tmp_path / "base64.cho")
    monkeypatch.setattr(tools, "SORT", tmp_path / "sort.cho")
    cfg = Config(runs=1, warmup=0, quick=True, measure_compile=False, log=lambda msg: None)
    rows, builds = tools.run_tool_rows(cfg, tmp_path, harness.default_runner)
    assert builds == []
    assert [r["status"] for r in rows] == ["unavailable"] * 3
    assert rows[0]["reason"] == f"unavailable: {tmp_path / 'base64.cho'} missing"
    if shutil.which("base64"):
        assert rows[0]["c"]["status"] == "ok" and len(rows[0]["c"]["timing"]["samples_ms"]) == 1
    doc = {"schema": "cancho-bench/1", "created": "x", "settings": {"runs": 1, "warmup": 0, "backends": ["exe"],
           "stdout": "/dev/null", "output_bytes": None}, "host": {}, "rows": rows, "derived": [], "builds": [],
           "compile": {"status": "unavailable", "reason": "not requested"}, "costs": {}}
    assert validate(doc) == []
    assert "unavailable: " in format_table(doc)


def _run_cli(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def _check_document(path: Path, runs: int, backends: list[str]) -> dict:
    doc = json.loads(path.read_text())
    assert validate(doc) == []
    assert doc["settings"]["runs"] == runs and doc["settings"]["backends"] == backends
    tools = tool_rows()
    assert [r["key"] for r in doc["rows"]] == (
        [k for p in PAIRS for k in [p.key] * len(backends)]
        + [k for t in tools for k in [t.pair.key] * len(backends)])
    sources = {t.pair.key: t.pair.cancho_source for t in tools}
    for row in doc["rows"]:
        if row["key"] in sources and not sources[row["key"]].exists():
            assert row["status"] == "unavailable" and "missing" in row["reason"]
            continue
        assert row["status"] == "ok", (row["key"], row["cancho"]["problems"], row["c"]["problems"])
        assert row["outputs_equal"] is True
        if row["key"] not in sources:
            assert row["cancho"]["output"]["bytes"] == 8 * 1024 * 1024
    assert doc["compile"]["status"] == "ok", doc["compile"]
    examples = doc["costs"]["examples"]
    assert examples["status"] == "ok"
    assert {p["program"] for p in examples["programs"]} >= {"examples/hello.cho"}
    for p in examples["programs"]:
        assert p["status"] == "ok", p
        assert set(p["ms"]) == {"check", "lower", "object"}
    kernel = doc["costs"]["kernel_roundtrip"]
    assert kernel["status"] == "ok", kernel
    assert set(kernel["ms"]) == {"jit", "exe"}
    return doc


@needs_cc
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    """``python -m benchmarks --quick --runs 1``: the real programs, built by the real compiler."""
    out = tmp_path / "latest.json"
    proc = _run_cli(["--quick", "--runs", "1", "--json", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_document(out, 1, ["exe"])
    assert "putchar per byte" in proc.stdout and "reference" in proc.stdout


@pytest.mark.bench
@pytest.mark.timeout(1600)
@needs_cc
def test_full_benchmark(tmp_path: Path) -> None:
    """The full measurement, both backends, 15 interleaved runs; prints the table."""
    out = tmp_path / "latest.json"
    proc = _run_cli(["--backend", "both", "--json", str(out)], timeout=1500)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_document(out, 15, ["exe", "jit"])
