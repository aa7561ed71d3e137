"""The JIT worker's cache of compiled programs (jit_worker.ProgramCache): a hit runs the same
code from a fresh state, different programs never share an entry, the bounds evict.

The programs are hand-written IR (the worker only needs a C `main`), so each test says exactly
what state a run writes.
"""

from __future__ import annotations

import dataclasses

import pytest

from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.jit_worker import (
    PYTHON_CHILD_ENV,
    CacheBounds,
    ProgramCache,
    content_key,
    parse_args,
)
from cancho_kernel.compiler.backends.process import RunLimits, RunResult, StdoutTarget

# Writes a global counter and a static buffer, prints the buffer and exits with
# argc * 10 + counter: a run that saw a previous run's writes prints "2" or exits with 12.
STATEFUL = r"""
@counter = internal global i32 0
@buf = internal global [2 x i8] c"0\0A"
declare i64 @write(i32, ptr, i64)
define i32 @main(i32 %argc, ptr %argv) {
  %c = load volatile i32, ptr @counter
  %n = add i32 %c, 1
  store volatile i32 %n, ptr @counter
  %b = load volatile i8, ptr @buf
  %b1 = add i8 %b, 1
  store volatile i8 %b1, ptr @buf
  %w = call i64 @write(i32 1, ptr @buf, i64 2)
  %a = mul i32 %argc, 10
  %s = add i32 %a, %n
  ret i32 %s
}
"""


def returning(n: int) -> str:
    """A program that exits with ``n`` (programs differing in one constant)."""
    return f"define i32 @main(i32 %argc, ptr %argv) {{\n  ret i32 {n}\n}}\n"


def run(worker: JitWorker, ir: str, argv: list[str] | None = None) -> RunResult:
    return worker.run(ir, argv or ["p"], b"", StdoutTarget.pipe(), RunLimits(timeout=30))


@pytest.mark.parametrize("python_child", [False, True], ids=["c-child", "python-child"])
def test_a_hit_starts_from_a_fresh_state(python_child):
    """Globals and static data a run writes never reach the worker: every run of the cached
    program sees the loaded image, argc included."""
    env = {PYTHON_CHILD_ENV: "1"} if python_child else None
    with JitWorker(env=env) as w:
        results = [run(w, STATEFUL, argv) for argv in (["p"], ["p"], ["p", "a", "b"], ["p"])]
        stats = w.cache_stats()
    assert [r.stdout for r in results] == [b"1\n"] * 4
    assert [r.exit_status for r in results] == [11, 11, 31, 11]
    assert [r.compile_cached for r in results] == [False, True, True, True]
    assert (stats.hits, stats.misses, stats.programs) == (3, 1, 1)


def test_different_programs_never_share_an_entry():
    with JitWorker() as w:
        results = [run(w, returning(n)) for n in (3, 4, 3, 4, 5)]
        stats = w.cache_stats()
    assert [r.exit_status for r in results] == [3, 4, 3, 4, 5]
    assert [r.compile_cached for r in results] == [False, False, True, True, False]
    assert (stats.programs, stats.hits, stats.misses) == (3, 2, 3)


def test_the_count_bound_evicts_the_least_recently_used():
    with JitWorker(cache=CacheBounds(programs=2)) as w:
        order = (1, 2, 1, 3, 2, 1)  # 3 evicts 2 (1 was used since), 2 evicts 1, 1 evicts 3
        results = [run(w, returning(n)) for n in order]
        stats = w.cache_stats()
    assert [r.exit_status for r in results] == list(order)
    assert [r.compile_cached for r in results] == [False, False, True, False, False, False]
    assert (stats.programs, stats.evictions) == (2, 3)


def test_a_program_over_the_byte_bound_runs_but_is_not_kept():
    with JitWorker(cache=CacheBounds(programs=16, max_bytes=1)) as w:
        results = [run(w, STATEFUL) for _ in range(2)]
        stats = w.cache_stats()
    assert [r.stdout for r in results] == [b"1\n", b"1\n"]
    assert [r.compile_cached for r in results] == [False, False]
    assert (stats.programs, stats.bytes, stats.misses) == (0, 0, 2)


def test_fifty_distinct_programs_stay_within_the_default_bounds():
    bounds = CacheBounds()
    with JitWorker() as w:
        w.start()
        pid = w.pid
        for n in range(50):
            assert run(w, returning(n)).exit_status == n
        stats = w.cache_stats()
        assert w.pid == pid  # 50 small programs stay far below the retirement bound
        assert run(w, returning(49)).compile_cached  # the most recent ones are kept
        assert not run(w, returning(0)).compile_cached  # the oldest were evicted
    assert stats.programs == bounds.programs
    assert stats.evictions == 50 - bounds.programs
    assert 0 < stats.bytes <= bounds.max_bytes


def test_a_worker_over_its_memory_bound_retires_after_the_run():
    """Past ``retire_bytes`` of private memory the worker ends after the run it compiled for,
    and the next run starts a fresh one (LLVM keeps memory per compiled program)."""
    with JitWorker(cache=CacheBounds(retire_bytes=1)) as w:
        w.start()
        pid = w.pid
        first = run(w, STATEFUL)
        assert w.pid is None  # ended and reaped
        second = run(w, STATEFUL)
        w.start()
        assert w.pid not in (None, pid)
    assert [r.stdout for r in (first, second)] == [b"1\n", b"1\n"]
    assert [r.compile_cached for r in (first, second)] == [False, False]


def test_the_worker_reads_its_bounds_from_its_command_line():
    args = parse_args(["7"])
    assert (args.fd, args.cache_programs, args.cache_bytes, args.retire_bytes) == (
        7, CacheBounds().programs, CacheBounds().max_bytes, CacheBounds().retire_bytes)
    args = parse_args(["7", "--cache-programs", "3", "--cache-bytes", "1000",
                       "--retire-bytes", "5000"])
    assert (args.cache_programs, args.cache_bytes, args.retire_bytes) == (3, 1000, 5000)


# -- ProgramCache alone, with stand-in programs of known sizes -----------------------------------


@dataclasses.dataclass
class FakeProgram:
    size_bytes: int
    freed: bool = False

    def free(self) -> None:
        self.freed = True


def test_the_byte_bound_evicts_and_frees_the_oldest_first():
    cache = ProgramCache(CacheBounds(programs=10, max_bytes=100))
    a, b, c = FakeProgram(40), FakeProgram(40), FakeProgram(40)
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a") is a  # a is now the most recently used
    cache.put("c", c)  # 120 bytes > 100: b goes
    assert (b.freed, a.freed, c.freed) == (True, False, False)
    assert cache.get("b") is None
    snap = cache.snapshot()
    assert (snap.programs, snap.bytes, snap.evictions, snap.hits, snap.misses) == (2, 80, 1, 1, 1)


def test_a_zero_count_bound_keeps_nothing():
    cache = ProgramCache(CacheBounds(programs=0))
    cache.put("a", FakeProgram(1))
    assert cache.get("a") is None
    assert cache.snapshot().programs == 0


def test_negative_bounds_are_refused():
    for bounds in (CacheBounds(programs=-1), CacheBounds(max_bytes=-1),
                   CacheBounds(retire_bytes=-1)):
        with pytest.raises(ValueError):
            ProgramCache(bounds)


def test_the_key_covers_ir_libraries_and_code_identity():
    base = content_key("ir", ["m"], ["/lib"], "x86_64 llvm=22")
    assert base == content_key("ir", ["m"], ["/lib"], "x86_64 llvm=22")
    variants = [content_key("ir2", ["m"], ["/lib"], "x86_64 llvm=22"),
                content_key("ir", [], ["/lib"], "x86_64 llvm=22"),
                content_key("ir", ["m"], [], "x86_64 llvm=22"),
                content_key("ir", ["m"], ["/lib"], "x86_64 llvm=21"),
                content_key("ir", ["m", ""], ["/lib"], "x86_64 llvm=22")]
    assert len({base, *variants}) == 1 + len(variants)


def test_the_worker_key_includes_the_llvm_version_and_target():
    import llvmlite.binding as llvm

    from cancho_kernel.compiler.backends import mcjit, native

    identity = mcjit.code_identity()
    assert native.host_triple() in identity
    assert "llvm=" + ".".join(map(str, llvm.llvm_version_info)) in identity
    cache = ProgramCache()
    assert cache.key("ir") == content_key("ir", [], [], identity)
