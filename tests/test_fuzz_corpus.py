"""Mutation fuzzing over every cancho file we have (fixtures, examples, std): a program with
bytes deleted, fragments inserted, runs duplicated or words swapped must get diagnostics, never a
Python exception or an `internal` refusal; whatever is still accepted must give IR that LLVM
verifies. Seeded, so a failure reproduces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("tests/conformance/*/*.cho"), *ROOT.glob("examples/**/*.cho"),
                *ROOT.glob("cancho_kernel/std/*.cho")])
FRAGMENTS = ["let", "(", ")", "}", "{", ";", "match x {", "release(io);", "&!", "0x", "[", "]", "::", ".",
             "borrow", "region a", "defer", "return", "&static", "T", "<", ">", "alloc_slice[a](", "box(h,",
             ",", "'", '"']
WORDS = ["int", "bool", "byte", "io", "heap", "i", "h", "0", "true", "res", "val", "pub"]


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(text) + 1)
        kind = rng.randrange(4)
        if kind == 0:
            text = text[:pos] + text[min(len(text), pos + rng.randint(1, 20)):]
        elif kind == 1:
            text = text[:pos] + rng.choice(FRAGMENTS) + text[pos:]
        elif kind == 2:
            a, b = sorted((rng.randrange(len(text) + 1), rng.randrange(len(text) + 1)))
            text = text[:pos] + text[a:b][:80] + text[pos:]
        else:
            text = text.replace(rng.choice(WORDS), rng.choice(WORDS), 1)
    return text


def fuzz(seed: int, count: int) -> None:
    rng = random.Random(seed)
    sources = {f: f.read_text(encoding="utf-8") for f in FILES}
    for i in range(count):
        f = rng.choice(FILES)
        text = mutate(sources[f], rng)
        result = api.compile_sources([SourceFile("mutant.cho", text)])
        # What this implementation lacks has its own rule (`unsupported-on-target`); `internal` is a bug.
        ours = [d for d in result.diagnostics if d.rule == Rule.INTERNAL]
        assert not ours, (f.name, i, ours[0].message, text)
        if result.ok:
            native.parse(result.ir)


def test_corpus_mutants_get_diagnostics():
    assert len(FILES) > 200
    fuzz(seed=1, count=1500)


@pytest.mark.slow
def test_many_corpus_mutants_get_diagnostics():
    fuzz(seed=2, count=30000)
