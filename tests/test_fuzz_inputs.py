"""Hostile input of every kind, through the whole compiler (parse, check, lower, LLVM verify):
random bytes, token soup, pathological shapes (depth, width, long names, huge literals) and
encodings (a BOM, UTF-16, Latin-1 bytes, NUL, lone surrogates). Each case must end in
diagnostics or an accepted program whose IR LLVM parses — never a Python exception, never an
`internal` refusal, never unbounded memory. Seeded, so a failure reproduces.

The default run has a few hundred cases; ``-m slow`` runs 20,000 and prints a report: cases,
tracebacks, ``internal`` refusals, cases over 10 s and the peak memory of the worst case (the
times are reported, not asserted: this machine is shared; peak memory is the test process's peak
resident size)."""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.lexer import KEYWORDS, ONE_CHAR_OPS, TWO_CHAR_OPS
from cancho_kernel.compiler.source import SourceFile

HELLO = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in { write_bytes(i, "hi\\n"); }
    release(io);
    return 0;
}
"""
TOKENS = [*KEYWORDS, *TWO_CHAR_OPS, *ONE_CHAR_OPS, "x", "y", "World", "Io", "int", "byte", "main", "0", "1",
          "9223372036854775807", "0xff", "'a'", '"s"', "&!a", "&a", "\n", " ", "// c\n", "split", "release"]


def random_bytes(rng: random.Random) -> str:
    raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    return raw.decode("utf-8", errors="surrogateescape")


def token_soup(rng: random.Random) -> str:
    return " ".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 200)))


def _main_returning(expr: str, items: str = "") -> str:
    return f"{items}fn main(world: World) -> [] int {{ release(world); return {expr}; }}\n"


def pathological(rng: random.Random) -> str:
    n = rng.choice([10, 100, 1000, 3000])
    shape = rng.randrange(9)
    if shape == 0:
        return _main_returning("(" * n + "1" + ")" * n)
    if shape == 1:
        return _main_returning(" + ".join(["1"] * n) + " - " + str(n))
    if shape == 2:
        return _main_returning("-" * min(n, 200) + "1")
    if shape == 3:
        return _main_returning("a", f"fn {'a' * n}() -> [] int {{ return 0; }}\n").replace(
            "return a;", f"return {'a' * n}();")
    if shape == 4:
        return _main_returning("9" * rng.randint(19, 400))
    if shape == 5:
        chain = "".join(f"if n == {i} {{ return {i}; }} else " for i in range(n))
        return f"fn pick(n: int) -> [] int {{ {chain}{{ return 0; }} }}\n" + _main_returning("pick(3) - 3")
    if shape == 6:
        return "".join(f"struct S{i} {{ v: S{i + 1} }}\n" for i in range(n)) + f"struct S{n} {{ v: int }}\n" \
            + _main_returning("0")
    if shape == 7:
        return "{" * n + "}" * rng.randint(0, n)
    return '"' + "\\" * rng.randint(0, 50) + "x" * n


def encodings(rng: random.Random) -> str:
    choice = rng.randrange(6)
    if choice == 0:
        return "\ufeff" + HELLO
    if choice == 1:
        return HELLO.encode("utf-16").decode("utf-8", errors="surrogateescape")
    if choice == 2:
        return HELLO.replace('"hi\\n"', '"h\u00e9"').encode("latin-1").decode("utf-8", errors="surrogateescape")
    if choice == 3:
        pos = rng.randrange(len(HELLO))
        return HELLO[:pos] + "\x00" + HELLO[pos:]
    if choice == 4:
        return HELLO.replace('"hi\\n"', '"\udcff"')
    return HELLO.replace("hi", "\u202e\u0301\U0001f600")


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "random bytes": random_bytes, "token soup": token_soup, "pathological shapes": pathological,
    "encodings": encodings}


@dataclass
class Report:
    cases: int = 0
    tracebacks: list[str] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)
    slow: list[tuple[str, float]] = field(default_factory=list)
    peak_bytes: int = 0

    def line(self) -> str:
        return (f"{self.cases} cases: {len(self.tracebacks)} tracebacks, {len(self.internal)} internal, "
                f"{len(self.slow)} over 10 s, peak {self.peak_bytes / 2**20:.1f} MiB")


def cases(seed: int, count: int) -> Iterator[tuple[str, str]]:
    rng = random.Random(seed)
    kinds = list(GENERATORS)
    for i in range(count):
        kind = kinds[i % len(kinds)]
        yield kind, GENERATORS[kind](rng)


def fuzz(seed: int, count: int) -> Report:
    report = Report()
    for kind, text in cases(seed, count):
        report.cases += 1
        t0 = time.monotonic()
        try:
            result = api.compile_sources([SourceFile("fuzz.cho", text)])
            if result.ok:
                native.parse(result.ir)
            report.internal += [f"{kind}: {d.message} :: {text[:120]!r}" for d in result.diagnostics
                                if d.rule == "internal"]
        except Exception as e:  # the API must never raise on user input
            report.tracebacks.append(f"{kind}: {type(e).__name__}: {e} :: {text[:120]!r}")
        seconds = time.monotonic() - t0
        if seconds > 10:
            report.slow.append((f"{kind}: {text[:80]!r}", seconds))
    # The whole process's peak resident size (Linux reports KiB): what the worst case needed, at most.
    report.peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return report


def test_hostile_inputs_get_diagnostics_never_a_traceback():
    report = fuzz(seed=11, count=320)
    print(report.line())
    assert not report.tracebacks, report.tracebacks[:3]
    assert not report.internal, report.internal[:3]


def test_each_generator_produces_what_it_claims():
    rng = random.Random(3)
    assert "\x00" in encodings(random.Random(9)) or any("\x00" in encodings(rng) for _ in range(30))
    assert any(len(pathological(rng)) > 3000 for _ in range(30))
    soup = token_soup(rng)
    assert soup.split()


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_twenty_thousand_hostile_inputs():
    report = fuzz(seed=12, count=20000)
    print(report.line())
    assert not report.tracebacks, report.tracebacks[:3]
    assert not report.internal, report.internal[:3]
    assert report.peak_bytes < 2**30, report.line()
