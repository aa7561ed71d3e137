"""A race fuzzer: no program the checker accepts races (issue 22, finding 8).

Each generated program borrows two counters uniquely (`&!p`, `&!o`), passes one of them through
a chain of the language's aggregate, binding and control-flow forms (a copy, a tuple and its
`let (..)`, a struct field, an enum payload taken apart by `match` — also through a shared borrow
of the enum —, a `var` assigned directly, in an `if` arm or in a loop, a function's result), and
gives the result to a thread (`spawn` here, inside a function that returns the handle, or inside
a function given both references as parameters) that writes or reads it through a shared copy,
while the spawning thread writes or reads a counter reached through another such chain, before
or after `join`; or lends a struct holding it to one thread, or shares a `&` of that struct with
two. A second family borrows both counters shared: readers only, which must all be accepted. The generator knows which counter each chain reaches, so it knows whether the
program races.

For every program the checker accepts, the executable is run under valgrind's helgrind (a
happens-before race detector: it reports two unsynchronised accesses whatever the timing), and
the run must report no race; the generator's own model must agree that it does not race. For
every program refused, the first rule must be `borrow-conflict`, the rule for a `&!` lent to a
thread (the reference's tests/reject/spawn_two_copies_of_unique). The default run is the single
forms first, each racing, then seeded combinations; `-m slow` runs many more.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import exe
from cancho_kernel.compiler.source import SourceFile

RACE_RULE = "borrow-conflict"
HELGRIND = ["valgrind", "--tool=helgrind", "--error-exitcode=99", "-q"]
VALGRIND_TIMEOUT = 120

HEAD = """edition 6;

struct Counter { n: int }

enum Maybe[T] { Some(T), Nothing }

struct Holder[T] { v: T, k: int }

fn work[&r](c: &!r Counter) -> [] int {
    c.n = c.n + 1;
    return 0;
}

fn look[&r](c: &r Counter) -> [] int {
    return c.n;
}

fn same[&r](c: &!r Counter) -> [] &!r Counter {
    return c;
}

fn same_s[&r](c: &r Counter) -> [] &r Counter {
    return c;
}
"""

HELPERS = {
    "start": """
fn start[&r](c: &!r Counter) -> [conc] Thread[&!r Counter, int] {
    let f = work;
    return spawn(c, f);
}
""",
    "race_w": """
fn race_w[&a, &b](x: &!a Counter, y: &!b Counter) -> [conc] int {
    let f = work;
    let t = spawn(x, f);
    y.n = y.n + 1;
    return join(t);
}
""",
    "start_pair": """
fn start_pair[&r](c: &!r Counter) -> [conc] (Thread[&!r Counter, int], int) {
    let f = work;
    return (spawn(c, f), 1);
}
""",
    "work_h": """
fn work_h[&r, &s](h: &!r Holder[&!s Counter]) -> [] int {
    let c = h.v;
    c.n = c.n + 1;
    return 0;
}
""",
    "work_hs": """
fn work_hs[&r, &s](h: &r Holder[&!s Counter]) -> [] int {
    let c = h.v;
    c.n = c.n + 1;
    return 0;
}
""",
    "race_r": """
fn race_r[&a, &b](x: &!a Counter, y: &!b Counter) -> [conc] int {
    let f = work;
    let t = spawn(x, f);
    let z = y.n;
    return join(t) + z;
}
""",
}

TAIL = """
fn main(world: World) -> [conc] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals } = split(world);
    release(io);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    release(net);
    release(clock);
    release(signals);
    let x = run();
    return 0;
}
"""

BASES = {"c": "p", "d": "o"}  # counter -> the `&!` borrowing it


@dataclass
class Chain:
    """A reference expression, the lines that make it (opening blocks) and those closing them."""

    expr: str
    obj: str
    pre: list[str] = field(default_factory=list)
    close: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Program:
    source: str
    races: bool
    forms: tuple[str, ...]


class Gen:
    def __init__(self, rng: random.Random, shared: bool = False):
        self.rng = rng
        self.n = 0
        self.shared = shared  # both counters borrowed shared (`&p`, `&o`): nothing may race
        self.ref = "&o Counter" if shared else "&!o Counter"
        self.same = "same_s" if shared else "same"

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    @staticmethod
    def other(obj: str) -> str:
        return BASES["d" if obj == "c" else "c"]

    # Each form takes a chain and extends it; the object it reaches is the generator's model.
    def copy(self, ch: Chain) -> None:
        a = self.fresh("a")
        ch.pre.append(f"let {a} = {ch.expr};")
        ch.expr = a

    def tuple(self, ch: Chain) -> None:
        t = self.fresh("t")
        ch.pre.append(f"let {t} = ({ch.expr}, 1);")
        ch.expr = f"{t}.0"

    def tuple_let(self, ch: Chain) -> None:
        a, b = self.fresh("a"), self.fresh("b")
        ch.pre.append(f"let ({a}, {b}) = ({ch.expr}, 1);")
        ch.expr = a

    def field(self, ch: Chain) -> None:
        h = self.fresh("h")
        ch.pre.append(f"let {h} = Holder {{ v: {ch.expr}, k: 1 }};")
        ch.expr = f"{h}.v"

    def enum_match(self, ch: Chain) -> None:
        m, q = self.fresh("m"), self.fresh("q")
        ch.pre += [f"let {m} = Maybe::Some({ch.expr});", f"match {m} {{", f"Maybe::Some({q}) => {{"]
        ch.close = ["}", "Maybe::Nothing => {}", "}"] + ch.close
        ch.expr = q

    def enum_borrowed(self, ch: Chain) -> None:
        m, mm, q = self.fresh("m"), self.fresh("mm"), self.fresh("q")
        ch.pre += [f"var {m} = Maybe::Some({ch.expr});", f"borrow {m} as &{mm} in {{", f"match {mm} {{",
                   f"Maybe::Some({q}) => {{"]
        ch.close = ["}", "Maybe::Nothing => {}", "}", "}"] + ch.close
        ch.expr = f"*{q}"

    def var(self, ch: Chain) -> None:
        w = self.fresh("w")
        ch.pre += [f"var {w}: {self.ref} = {self.other(ch.obj)};", f"{w} = {ch.expr};"]
        ch.expr = w

    def if_var(self, ch: Chain) -> None:
        w, k = self.fresh("w"), self.rng.randint(0, 1)
        ch.pre += [f"var {w}: {self.ref} = {self.other(ch.obj)};", f"if flag == {k} {{", f"{w} = {ch.expr};", "}"]
        if k == 0:  # `flag` is 1: the arm does not run
            ch.obj = "d" if ch.obj == "c" else "c"
        ch.expr = w

    def loop_var(self, ch: Chain) -> None:
        w, i = self.fresh("w"), self.fresh("i")
        ch.pre += [f"var {w}: {self.ref} = {self.other(ch.obj)};", f"var {i} = 0;", f"while {i} < 2 {{",
                   f"{w} = {ch.expr};", f"{i} = {i} + 1;", "}"]
        ch.expr = w

    def match_var(self, ch: Chain) -> None:
        w, m, q = self.fresh("w"), self.fresh("m"), self.fresh("q")
        ch.pre += [f"var {w}: {self.ref} = {self.other(ch.obj)};", f"let {m} = Maybe::Some({ch.expr});",
                   f"match {m} {{", f"Maybe::Some({q}) => {{", f"{w} = {q};", "}", "Maybe::Nothing => {}", "}"]
        ch.expr = w

    def arena(self, ch: Chain) -> None:
        a, b = self.fresh("ar"), self.fresh("b")
        ch.pre += [f"region {a} {{", f"let {b} = alloc[{a}](Holder {{ v: {ch.expr}, k: 2 }});"]
        ch.close = ["}"] + ch.close
        ch.expr = f"{b}.v"

    def slice(self, ch: Chain) -> None:
        a, b, w = self.fresh("ar"), self.fresh("sl"), self.fresh("w")
        ch.pre += [f"let {w}: {self.ref} = {self.other(ch.obj)};", f"region {a} {{",
                   f"let {b} = alloc_slice[{a}](2, {w});", f"{b}[1] = {ch.expr};"]
        ch.close = ["}"] + ch.close
        ch.expr = f"{b}[1]"

    def returned(self, ch: Chain) -> None:
        ch.expr = f"{self.same}({ch.expr})"

    FORMS: dict[str, Callable] = {}

    def chain(self, obj: str, forms: list[str]) -> Chain:
        ch = Chain(BASES[obj], obj)
        for f in forms:
            getattr(self, f)(ch)
        return ch


Gen.FORMS = {name: getattr(Gen, name) for name in
             ("copy", "tuple", "tuple_let", "field", "enum_match", "enum_borrowed", "var", "if_var", "loop_var",
              "match_var", "arena", "slice", "returned")}
SITES = ("direct_w", "direct_r", "handle", "handle_pair", "spawn_pair", "holder", "shared_holder", "params_w", "params_r", "after_join")


def parent_op(gen: Gen, y: str, write: bool) -> str:
    if write:
        return f"let {gen.fresh('z')} = work({y});"
    return f"r = r + look({y});"


def spawn_site(gen: Gen, site: str, x: Chain, y: Chain, write: bool) -> tuple[list[str], set[str], bool]:
    """The lines that lend `x` to a thread, the helpers they need, and whether they race."""
    same = x.obj == y.obj
    t = gen.fresh("th")
    if site == "readers":  # shared borrows only: two reader threads and the spawner reading
        u = gen.fresh("u")
        return [f"let {t} = spawn({x.expr}, look_f);", f"let {u} = spawn({y.expr}, look_f);",
                f"r = look({x.expr}) + look({y.expr}) + join({t}) + join({u});"], set(), False
    if site == "direct_w":
        return [f"let {t} = spawn({x.expr}, work_f);", parent_op(gen, y.expr, write), f"r = join({t});"], set(), same
    if site == "direct_r":
        s = gen.fresh("s")
        return [f"let {s}: &o Counter = {x.expr};", f"let {t} = spawn({s}, look_f);", parent_op(gen, y.expr, write),
                f"r = join({t});"], set(), same and write
    if site == "handle":
        return [f"let {t} = start({x.expr});", parent_op(gen, y.expr, write), f"r = join({t});"], {"start"}, same
    if site == "handle_pair":  # the handle comes back inside a tuple
        k = gen.fresh("k")
        return [f"let ({t}, {k}) = start_pair({x.expr});", parent_op(gen, y.expr, write), f"r = join({t}) + {k};"], \
            {"start_pair"}, same
    if site == "spawn_pair":  # a tuple holding a `spawn`, taken apart, joined before the other access
        pr, u, k = gen.fresh("pr"), gen.fresh("u"), gen.fresh("k")
        return [f"let {pr} = (spawn({x.expr}, work_f), 1);", f"let ({u}, {k}) = {pr};", f"r = join({u}) + {k};",
                parent_op(gen, y.expr, write)], set(), False
    if site == "holder":  # the thread writes through a `&!` it reads out of a struct it is lent
        h, hh = gen.fresh("hold"), gen.fresh("hh")
        return [f"var {h} = Holder {{ v: {x.expr}, k: 0 }};", f"borrow mut {h} as &!{hh} in {{",
                f"let wh = work_h;", f"let {t} = spawn({hh}, wh);", parent_op(gen, y.expr, write), f"r = join({t});",
                "}"], {"work_h"}, same
    if site == "shared_holder":  # a second thread shares the struct: both write through its `&!`
        h, hs, u = gen.fresh("hold"), gen.fresh("hs"), gen.fresh("u")
        return [f"var {h} = Holder {{ v: {x.expr}, k: 0 }};", f"borrow {h} as &{hs} in {{", "let ws = work_hs;",
                f"let {t} = spawn({hs}, ws);", f"let {u} = spawn({hs}, ws);", f"r = join({t}) + join({u});", "}",
                parent_op(gen, y.expr, write)], {"work_hs"}, True
    if site in ("params_w", "params_r"):
        fn = site.replace("params", "race")
        return [f"r = {fn}({x.expr}, {y.expr});"], {fn}, same
    return [f"let {t} = spawn({x.expr}, work_f);", f"r = join({t});", parent_op(gen, y.expr, write)], set(), False


def program(gen: Gen, x_forms: list[str], y_forms: list[str], x_obj: str, y_obj: str, site: str,
            write: bool) -> Program:
    x = gen.chain(x_obj, x_forms)
    y = gen.chain(y_obj, y_forms)
    lines, helpers, races = spawn_site(gen, site, x, y, write)
    mut, bang = ("", "") if gen.shared else ("mut ", "!")
    body = x.pre + y.pre + lines + y.close + x.close
    inner = "\n".join(" " * 12 + ln for ln in body)
    run = f"""
fn run() -> [conc] int {{
    var c = Counter {{ n: 0 }};
    var d = Counter {{ n: 0 }};
    var r = 0;
    var flag = 1;
    let work_f = work;
    let look_f = look;
    borrow {mut}c as &{bang}p in {{
        borrow {mut}d as &{bang}o in {{
{inner}
        }}
    }}
    return r + c.n + d.n + flag;
}}
"""
    source = HEAD + "".join(HELPERS[h] for h in sorted(helpers)) + run + TAIL
    return Program(source, races, (*x_forms, "|", *y_forms, site, "write" if write else "read"))


def single_forms() -> list[Program]:
    """Each form alone on the thread's side, racing with a write of the same counter; then each
    spawn site with a copy on the thread's side."""
    gen = Gen(random.Random(0))
    return [program(gen, [f], [], "c", "c", "direct_w", True) for f in Gen.FORMS] + \
        [program(gen, ["copy"], [], "c", "c", site, True) for site in SITES]


SHARED_FORMS = ("copy", "tuple", "tuple_let", "field", "enum_match", "enum_borrowed", "var", "if_var", "loop_var",
                "match_var", "returned")


def shared_programs(seed: int, count: int) -> list[Program]:
    """Programs whose counters are borrowed shared: every one must be accepted and race-free."""
    rng = random.Random(seed)
    gen = Gen(rng, shared=True)
    return [program(gen, [rng.choice(SHARED_FORMS) for _ in range(rng.randint(0, 3))],
                    [rng.choice(SHARED_FORMS) for _ in range(rng.randint(0, 2))], rng.choice("cd"), rng.choice("cd"),
                    "readers", False) for _ in range(count)]


def random_programs(seed: int, count: int) -> list[Program]:
    rng = random.Random(seed)
    gen = Gen(rng)
    names = list(Gen.FORMS)
    out = []
    for _ in range(count):
        xf = [rng.choice(names) for _ in range(rng.randint(0, 3))]
        yf = [rng.choice(names) for _ in range(rng.randint(0, 2))]
        out.append(program(gen, xf, yf, rng.choice("cd"), rng.choice("cd"), rng.choice(SITES), rng.random() < 0.6))
    return out


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    rule: str | None
    race_report: str | None  # helgrind's report when it found a race


def judge(prog: Program, tmp: Path) -> Verdict:
    src = SourceFile("fuzz.cho", prog.source)
    compiled = api.compile_sources([src])
    if not compiled.ok:
        return Verdict(False, compiled.diagnostics[0].rule, None)
    binary = tmp / "fuzz"
    exe.build_executable(compiled.ir, binary)
    run = subprocess.run([*HELGRIND, str(binary)], capture_output=True, text=True, timeout=VALGRIND_TIMEOUT)
    report = run.stderr if run.returncode == 99 or "data race" in run.stderr else None
    assert run.returncode in (0, 99), f"the program failed under helgrind ({run.returncode}):\n{run.stderr[-2000:]}"
    return Verdict(True, None, report)


def check(prog: Program, tmp: Path) -> None:
    v = judge(prog, tmp)
    where = f"forms {prog.forms}:\n{prog.source}"
    if not v.accepted:
        assert v.rule == RACE_RULE, f"refused with `{v.rule}`, not the race rule `{RACE_RULE}`; {where}"
        return
    assert v.race_report is None, f"accepted, and helgrind reports a race; {where}\n{v.race_report[-3000:]}"
    assert not prog.races, f"accepted, and the program races (helgrind saw nothing this run); {where}"


def test_helgrind_sees_a_race(tmp_path: Path) -> None:
    """The detector itself: two C threads incrementing one counter are reported."""
    assert shutil.which("valgrind"), "valgrind is needed (Debian's `valgrind`, installed by .ci/run)"
    c = tmp_path / "race.c"
    c.write_text("#include <pthread.h>\nstatic long n;\nstatic void *w(void *a) { n++; return a; }\n"
                 "int main(void) { pthread_t t; pthread_create(&t, 0, w, 0); n++; pthread_join(t, 0); return 0; }\n")
    subprocess.run(["cc", "-O0", "-pthread", str(c), "-o", str(tmp_path / "race")], check=True)
    run = subprocess.run([*HELGRIND, str(tmp_path / "race")], capture_output=True, text=True, timeout=VALGRIND_TIMEOUT)
    assert run.returncode == 99 and "data race" in run.stderr


@pytest.mark.parametrize("prog", single_forms(), ids=lambda p: "-".join(p.forms))
def test_single_form_races_are_refused(prog: Program, tmp_path: Path) -> None:
    check(prog, tmp_path)


@pytest.mark.parametrize("prog", random_programs(22, 30), ids=lambda p: "-".join(p.forms))
def test_random_programs(prog: Program, tmp_path: Path) -> None:
    check(prog, tmp_path)


def check_shared(prog: Program, tmp: Path) -> None:
    v = judge(prog, tmp)
    assert v.accepted, f"only shared borrows, refused with `{v.rule}`:\n{prog.source}"
    assert v.race_report is None, f"helgrind reports a race:\n{prog.source}\n{v.race_report[-3000:]}"


@pytest.mark.parametrize("prog", shared_programs(7, 8), ids=lambda p: "-".join(p.forms))
def test_shared_borrows_are_accepted_and_race_free(prog: Program, tmp_path: Path) -> None:
    check_shared(prog, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_random_programs_many(seed: int, tmp_path: Path) -> None:
    for prog in random_programs(1000 + seed, 40):
        check(prog, tmp_path)
    for prog in shared_programs(2000 + seed, 10):
        check_shared(prog, tmp_path)


def test_generator_covers_every_form_and_site() -> None:
    """The default run meets every form on both sides and every spawn site, racing and not."""
    progs = single_forms() + random_programs(22, 30)
    seen = {f for p in progs for f in p.forms}
    assert set(Gen.FORMS) <= seen and set(SITES) <= seen
    assert any(p.races for p in progs) and any(not p.races for p in progs)
