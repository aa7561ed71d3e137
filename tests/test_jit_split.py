"""Split runs on the JIT (issue 15): a cell's program compiled as a std library part and the
cell's own part (``backends/split.py``), the library's optimised code kept and reused across
edits. What a program does must not change: over a corpus, a split run's stdout, stderr and exit
status equal the whole-program run's on the same warm worker; the library cache is hit by an
edited cell; anything the splitter cannot handle falls back to the whole program.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cancho_kernel import testing
from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native, split
from cancho_kernel.compiler.backends.exe import LinkError
from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.process import RunLimits, RunResult, StdoutTarget
from cancho_kernel.compiler.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.cell_latency import STD_CELL  # noqa: E402

CONFORMANCE = ROOT / "tests" / "conformance" / "accept"
STD_TESTS = ROOT / "tests" / "std"
LIMITS = RunLimits(timeout=20.0)

# Programs run with no arguments and empty stdin (the conformance fixtures' STDIN lines are
# irrelevant here: both runs get the same input). `serve` is a server and is left out.
PROGRAMS: list[list[Path]] = (
    [[p] for p in sorted(CONFORMANCE.glob("*.cho"))]
    + [[p] for p in sorted((ROOT / "tests" / "programs").glob("*.cho"))]
    + [[p] for p in sorted(STD_TESTS.glob("*_driver.cho"))]
    + [[p] for p in sorted((ROOT / "tests" / "split_programs").glob("*.cho"))]
    + [[ROOT / "examples" / "hello.cho"]]
    + [[ROOT / "examples" / d / f"{d}.cho"] for d in ("base64", "sort", "cut")]
)
STD_TEST_FILES = sorted(STD_TESTS.glob("test_*.cho"))


def observed(run: RunResult) -> tuple:
    return run.stdout, run.stderr, run.exit_status, run.signal, run.timed_out


@pytest.fixture(scope="module")
def worker():
    w = JitWorker()
    yield w
    w.close()


def both(worker: JitWorker, ir: str, argv: list[str] | None = None,
         stdin: bytes = b"") -> tuple[RunResult, RunResult]:
    """The whole-program run, then the split run, of the same IR."""
    whole = worker.run(ir, argv, stdin, StdoutTarget.pipe(), LIMITS)
    parted = worker.run(ir, argv, stdin, StdoutTarget.pipe(), LIMITS, split=True)
    return whole, parted


def compiled_ir(paths: list[Path]) -> str:
    result = api.compile_sources(api.load_sources(paths))
    assert result.ok and result.ir, [d.render() for d in result.diagnostics]
    return result.ir


def std_cell(k: int, extra: str = "") -> str:
    result = api.compile_sources([SourceFile("cell.cho", STD_CELL.format(k=k) + extra)])
    assert result.ok and result.ir, [d.render() for d in result.diagnostics]
    return result.ir


def uses_std(ir: str) -> bool:
    return f'@"{split.LIBRARY_PREFIX}' in ir


@pytest.mark.parametrize("paths", PROGRAMS, ids=lambda ps: f"{ps[0].parent.name}/{ps[0].stem}")
def test_a_split_run_behaves_as_the_whole_program(paths, worker):
    ir = compiled_ir(paths)
    before = worker.library_stats()[1]
    whole, parted = both(worker, ir, [paths[0].stem], b"3\n1\n2\n")
    after = worker.library_stats()[1]
    assert observed(parted) == observed(whole)
    assert after.fallbacks == before.fallbacks, "the split failed and fell back"
    if uses_std(ir):
        assert after.runs == before.runs + 1, "a std-using program was not compiled split"
        assert after.pieced == before.pieced + 1, "its cell part was not cut per function"


@pytest.mark.parametrize("path", STD_TEST_FILES, ids=lambda p: p.stem)
def test_std_test_files_pass_and_fail_alike_split(path, worker):
    """Every `cancho test` case of the std test files, as its generated main runs it."""
    sources = [SourceFile.from_path(path)]
    parsed = [api.parse_source(s)[0] for s in sources]
    found = testing.collect(parsed)
    generated = SourceFile(testing.GENERATED_PATH, testing.generate_main(found.tests, found.imports))
    ir = compiled_ir_sources([*sources, generated])
    before = worker.library_stats()[1]
    for t in found.tests:
        whole, parted = both(worker, ir, ["tests", t.name])
        assert observed(parted) == observed(whole), t.name
    after = worker.library_stats()[1]
    # A file whose std calls were all evaluated while compiling (pure calls on constants,
    # check/callfold.py: test_dirs's numbers) has no std part left to split off.
    split_off = 1 if 'define internal i64 @"lexs_std.' in ir or '@"lexs_std.' in ir else 0
    assert (after.runs, after.fallbacks) == (before.runs + split_off, before.fallbacks)


def compiled_ir_sources(sources: list[SourceFile]) -> str:
    result = api.compile_sources(sources)
    assert result.ok and result.ir, [d.render() for d in result.diagnostics]
    return result.ir


def test_the_library_part_is_the_same_text_whatever_the_cell():
    """An edited cell (another constant, another string, a new function) leaves the library
    part's text, the cache key, unchanged; the parts are valid modules and only std functions
    are defined in the library."""
    first = split.split_ir(std_cell(3))
    edited = split.split_ir(std_cell(4, '\nfn other() -> [] int {\n    return 7;\n}\n'))
    assert first.library == edited.library
    assert first.cell != edited.cell
    for part in (first.library, first.cell):
        native.parse(part)
    lib_defs = [line for line in first.library.splitlines() if line.startswith("define")]
    cell_defs = [line for line in first.cell.splitlines() if line.startswith("define")]
    assert lib_defs and all(f'@"{split.LIBRARY_PREFIX}' in line for line in lib_defs)
    assert cell_defs and not any(f'@"{split.LIBRARY_PREFIX}' in line for line in cell_defs)
    assert 'lexs_std.fmt.put_int' in first.library_exports


def test_a_program_without_std_is_not_split():
    with pytest.raises(split.NothingToSplit):
        split.split_ir(compiled_ir([ROOT / "examples" / "hello.cho"]))


def test_an_edited_cell_reuses_the_optimised_library(worker):
    lib_before, split_before = worker.library_stats()
    for k in (11, 12, 13):
        whole, parted = both(worker, std_cell(k))
        assert observed(parted) == observed(whole)
        assert parted.stdout == f"sum {45 * k}\n".encode()
    lib_after, split_after = worker.library_stats()
    assert split_after.runs == split_before.runs + 3
    # The first of the three may find the library from an earlier test; the others must.
    assert lib_after.hits - lib_before.hits >= 2
    assert lib_after.misses - lib_before.misses <= 1
    assert split_after.fallbacks == split_before.fallbacks


def test_an_unchanged_cell_is_a_program_cache_hit(worker):
    ir = std_cell(21)
    worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS, split=True)
    again = worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS, split=True)
    assert again.compile_cached and again.stdout == f"sum {45 * 21}\n".encode()


def test_a_failing_split_falls_back_to_the_whole_program(worker):
    """A top-level line the splitter does not know (an attribute group) makes it give up; the
    run still happens, as the whole program."""
    ir = std_cell(31) + "\nattributes #0 = { nounwind }\n"
    with pytest.raises(split.SplitError):
        split.split_ir(ir)
    before = worker.library_stats()[1]
    whole, parted = both(worker, ir)
    after = worker.library_stats()[1]
    assert parted.stdout == f"sum {45 * 31}\n".encode()
    assert observed(parted) == observed(whole)
    assert after.fallbacks == before.fallbacks + 1
    assert after.runs == before.runs


def test_a_link_error_is_the_whole_programs_error(worker):
    """A program that cannot link fails split exactly as it fails whole (the fallback reports
    the whole program's error, not the split's)."""
    ir = std_cell(41).replace('call ptr @"malloc"', 'call ptr @"cancho_no_such_symbol"')
    ir = ir.replace('declare ptr @"malloc"(i64 %".1")',
                    'declare ptr @"cancho_no_such_symbol"(i64 %".1")')
    assert '@"malloc"' not in ir  # used by main (the cell part) and by std.vec (the library)
    with pytest.raises(LinkError) as whole:
        worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS)
    with pytest.raises(LinkError) as parted:
        worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS, split=True)
    assert str(parted.value) == str(whole.value)


def test_the_kernel_runner_splits_cells_but_not_benches(tmp_path):
    from cancho_kernel.compiler.cache import BuildCache
    from cancho_kernel.kernel.runner import Runner, RunRequest

    runner = Runner(cache=BuildCache(tmp_path))
    try:
        ir = std_cell(51)
        req = RunRequest(ir=ir, backend="jit", target=StdoutTarget.pipe())
        start = runner.worker.library_stats()[1].runs
        outcome = runner.run(req)  # a cell
        assert outcome.failure is None and outcome.result.stdout == f"sum {45 * 51}\n".encode()
        assert runner.worker.library_stats()[1].runs == start + 1
        runner.run_blocking(RunRequest(ir=std_cell(52), backend="jit",
                                       target=StdoutTarget.pipe()))  # a bench's run
        assert runner.worker.library_stats()[1].runs == start + 1
    finally:
        runner.close()


def test_a_local_name_ending_in_c_is_not_read_as_a_string_constant():
    """Regression: `%"mac"` once looked like the start of a `c"..."` constant, hiding the
    constants used after it on the line (std.hmac's tests fell back to the whole program)."""
    assert split._refs('%"mac" = call i64 @"f"(ptr @"str.1") c"a@b" , ptr @"c"') == {
        "str.1", "f", "c"}


def test_evicted_libraries_and_programs_stay_correct():
    """With room for one entry in each cache, two cells using different std functions evict
    each other's library and program every run: a library in use by a kept program outlives
    its eviction, and each run still prints what the whole program prints."""
    from cancho_kernel.compiler.backends.jit_worker import CacheBounds

    other = compiled_ir([ROOT / "tests" / "split_programs" / "vec_of_user_structs.cho"])
    with JitWorker(cache=CacheBounds(programs=1)) as small:
        for ir in (std_cell(61), other, std_cell(61), other, std_cell(62)):
            whole, parted = both(small, ir)
            assert observed(parted) == observed(whole)
        lib, stats = small.library_stats()
        assert lib.evictions >= 3 and stats.fallbacks == 0
