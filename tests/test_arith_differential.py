"""Random arithmetic programs on both backends against an independent Python model.

A seeded generator builds small programs (one function each: a few `let`s over `int` and `byte`
expressions, returning an `int`) with literal operands, `var`s the optimiser sees through, values
hidden behind `value_barrier`, and every operator: `+ - * / % << >> & | ^`, unary `-` and `~`,
comparisons, `&& || !`, `byte_of`/`int_of`, `wrapping_*`. The model below is written from
language.md §4.6 alone (it does not use `check/consteval.py`): overflow of `+ - *` and unary `-`
traps, `/` and `%` truncate toward zero, a zero divisor traps, `MIN / -1` traps and `MIN % -1` is
0, a shift amount outside 0..63 traps, `byte_of` traps outside 0..255, `&&`/`||` short-circuit.

It predicts one of three outcomes for each program:

* `constant-traps` — a subtree whose operands are all literals (literals, and `- ~ !`, binary
  operators, `byte_of`/`int_of`/`wrapping_*` over such subtrees: language.md §4.6 "Constant
  folding") would trap. The checker must refuse exactly those programs, at a span inside them.
* a trap (SIGILL, status 132) at run time;
* the value, printed in decimal.

Many programs share one compiled module: `run` reads a start index from stdin and calls
program k for every k >= start, printing and flushing each result. A trap at k ends the run; the
next run starts at k + 1. Both backends must agree byte for byte and match the model; the line
where they differ names the program, which is reported with its source and the model's answer.
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass
from typing import Optional, Union

import pytest

from cancho_kernel.compiler import api, diagnostics
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.source import SourceFile

from test_undefined_behaviour import MAIN, PUT_LINE, TRAP, BothBackends, Observed

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1

# ---------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Lit:
    value: int
    text: str  # how it is written (MIN has two spellings)


@dataclass(frozen=True)
class BoolLit:
    value: bool


@dataclass(frozen=True)
class Var:
    name: str  # a `var` or a `value_barrier` binding, or an earlier `let` of the program


@dataclass(frozen=True)
class Unary:
    op: str  # - ~ !
    operand: "Expr"


@dataclass(frozen=True)
class Binary:
    op: str
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Call:
    name: str  # byte_of int_of wrapping_add wrapping_sub wrapping_mul b2i
    args: tuple


Expr = Union[Lit, BoolLit, Var, Unary, Binary, Call]

ARITH = ("+", "-", "*", "/", "%")
SHIFTS = ("<<", ">>")
BITS = ("&", "|", "^")
ORDER = ("<", "<=", ">", ">=")
EQUALITY = ("==", "!=")
LOGIC = ("&&", "||")
LEVEL = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "|": 5, "^": 6,
         "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}


# ---------------------------------------------------------------------------- the model


class Trapped(Exception):
    """The operation traps at run time."""


def _in_range(v: int) -> int:
    if not INT_MIN <= v <= INT_MAX:
        raise Trapped()
    return v


def _wrap(v: int) -> int:
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _div(a: int, b: int) -> int:
    if b == 0:
        raise Trapped()
    q = abs(a) // abs(b)
    return _in_range(q if (a < 0) == (b < 0) else -q)


def _rem(a: int, b: int) -> int:
    if b == 0:
        raise Trapped()
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return a - b * q  # the remainder always fits, MIN % -1 included


def _shift_amount(b: int) -> int:
    if not 0 <= b <= 63:
        raise Trapped()
    return b


def _byte_of(n: int) -> int:
    if not 0 <= n <= 255:
        raise Trapped()
    return n


def evaluate(e: Expr, env: dict[str, int]) -> Union[int, bool]:
    """The value of e, or Trapped. Left to right; `&&`/`||` skip their right operand."""
    if isinstance(e, (Lit, BoolLit)):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Unary):
        v = evaluate(e.operand, env)
        return {"-": lambda: _in_range(-v), "~": lambda: ~v, "!": lambda: not v}[e.op]()
    if isinstance(e, Binary):
        if e.op in LOGIC:
            a = evaluate(e.left, env)
            if a == (e.op == "||"):
                return a
            return evaluate(e.right, env)
        a, b = evaluate(e.left, env), evaluate(e.right, env)
        op = e.op
        if op == "+":
            return _in_range(a + b)
        if op == "-":
            return _in_range(a - b)
        if op == "*":
            return _in_range(a * b)
        if op == "/":
            return _div(a, b)
        if op == "%":
            return _rem(a, b)
        if op == "<<":
            return _wrap(a << _shift_amount(b))
        if op == ">>":
            return a >> _shift_amount(b)
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if isinstance(e, Call):
        args = [evaluate(a, env) for a in e.args]
        if e.name == "byte_of":
            return _byte_of(args[0])
        if e.name == "int_of":
            return args[0]
        if e.name == "b2i":
            return 1 if args[0] else 0
        if e.name == "wrapping_add":
            return _wrap(args[0] + args[1])
        if e.name == "wrapping_sub":
            return _wrap(args[0] - args[1])
        if e.name == "wrapping_mul":
            return _wrap(args[0] * args[1])
    raise AssertionError(e)


FOLDED_CALLS = ("byte_of", "int_of", "wrapping_add", "wrapping_sub", "wrapping_mul")


def constant_trap(e: Expr) -> Optional[bool]:
    """Whether folding e's all-literal subtrees meets a trap: True (refused), False (folds
    cleanly) — or None when e itself is not all-literal (its subtrees were still examined)."""
    trapped, _ = _fold(e)
    return trapped


def _fold(e: Expr) -> tuple[bool, bool]:
    """(some all-literal subtree traps, e is all-literal)."""
    if isinstance(e, (Lit, BoolLit)):
        return False, True
    if isinstance(e, Var):
        return False, False
    if isinstance(e, Unary):
        kids = [e.operand]
    elif isinstance(e, Binary):
        kids = [e.left, e.right]
    else:
        kids = list(e.args)
    results = [_fold(k) for k in kids]
    if any(t for t, _ in results):
        return True, False
    literal = all(c for _, c in results) and not (isinstance(e, Binary) and e.op in LOGIC) \
        and not (isinstance(e, Call) and e.name not in FOLDED_CALLS)
    if not literal:
        return False, False
    try:
        evaluate(e, {})
    except Trapped:
        return True, False
    return False, True


# ---------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Program:
    """One generated program: its variables, its `let`s (the last is the result) and what the
    model predicts."""

    vars: tuple  # (name, value, barrier?)
    lets: tuple  # Expr per `let t<j>`
    parens: bool  # fully parenthesised, or with the fewest parentheses the precedence allows

    def refused(self) -> bool:
        return any(_fold(e)[0] for e in self.lets)

    def outcome(self) -> Optional[int]:
        """The printed value, or None for a run-time trap (only for accepted programs)."""
        env = {name: value for name, value, _ in self.vars}
        try:
            for j, e in enumerate(self.lets):
                env[f"t{j}"] = evaluate(e, env)
        except Trapped:
            return None
        return env[f"t{len(self.lets) - 1}"]

    def function(self, name: str) -> str:
        lines = [f"fn {name}() -> [] int {{"]
        for var, value, barrier in self.vars:
            lit = render_int(value, None)
            lines.append(f"    let {var} = value_barrier({lit});" if barrier else f"    var {var} = {lit};")
        for j, e in enumerate(self.lets):
            lines.append(f"    let t{j} = {render(e, self.parens)};")
        lines.append(f"    return t{len(self.lets) - 1};")
        lines.append("}")
        return "\n".join(lines)


def render_int(value: int, text: Optional[str]) -> str:
    if text is not None:
        return text
    return str(value) if value >= 0 else f"({value})" if value != INT_MIN else "(-9223372036854775807 - 1)"


def render(e: Expr, full: bool) -> str:
    """Source text; `full` parenthesises every operation, otherwise only where the precedence
    table (language.md §4.2) needs it (comparisons never chain)."""
    if isinstance(e, Lit):
        return render_int(e.value, e.text)
    if isinstance(e, BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Unary):
        inner = render(e.operand, full)
        if isinstance(e.operand, (Binary, Unary)) and not full or inner.startswith("-"):
            inner = f"({inner})"
        return f"({e.op}{inner})" if full else f"{e.op}{inner}"
    if isinstance(e, Call):
        return f"{e.name}(" + ", ".join(render(a, full) for a in e.args) + ")"
    left, right = render(e.left, full), render(e.right, full)
    if full:
        return f"({left} {e.op} {right})"
    lv = LEVEL[e.op]
    if isinstance(e.left, Binary) and (LEVEL[e.left.op] < lv or (lv in (3, 4) and LEVEL[e.left.op] in (3, 4))):
        left = f"({left})"
    if isinstance(e.right, Binary) and (LEVEL[e.right.op] <= lv or (lv in (3, 4) and LEVEL[e.right.op] in (3, 4))):
        right = f"({right})"
    return f"{left} {e.op} {right}"


INTERESTING = [0, 1, -1, 2, -2, 3, 7, -7, 10, 31, 32, 62, 63, 64, 65, 100, 127, 128, 255, 256, -255,
               1 << 31, 1 << 32, 3037000499, 3037000500, -3037000500, 1 << 62, -(1 << 62),
               INT_MAX, INT_MAX - 1, INT_MIN, INT_MIN + 1]


def lit_of(v: int) -> Expr:
    """A literal as written: `-7` is unary minus on `7` (still all-literal, so it folds)."""
    if v == INT_MIN:
        return Lit(v, "(-9223372036854775807 - 1)")
    return Lit(v, str(v)) if v >= 0 else Unary("-", Lit(-v, str(-v)))


DIVISORS = [0, -1, 1, 2, -2, 3, -3, 7, INT_MIN, INT_MAX]


class Generator:
    """Seeded random programs, biased towards the operands where traps live."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def value(self) -> int:
        r = self.r
        roll = r.random()
        if roll < 0.6:
            return r.choice(INTERESTING)
        if roll < 0.85:
            return r.randint(-300, 300)
        return r.randint(INT_MIN, INT_MAX)

    def literal(self) -> Expr:
        v = self.value()
        if v == INT_MIN and self.r.random() < 0.5:
            return Lit(v, "-9223372036854775808")  # the one literal the parser folds negated
        return lit_of(v)

    def int_expr(self, depth: int, names: list[str]) -> Expr:
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            if names and r.random() < 0.55:
                return Var(r.choice(names))
            return self.literal()
        roll = r.random()
        if roll < 0.62:
            op = r.choice(ARITH + ARITH + SHIFTS + SHIFTS + BITS)
            left = self.int_expr(depth - 1, names)
            if op in SHIFTS and r.random() < 0.6:
                right = lit_of(r.choice([0, 1, 13, 62, 63, 64, 65, 100, -1, INT_MAX, INT_MIN]))
            elif op in ("/", "%") and r.random() < 0.5:
                # the divisors where `/` and `%` differ from plain hardware division
                right = lit_of(r.choice(DIVISORS)) if r.random() < 0.5 else self.int_expr(0, names)
                if r.random() < 0.3:
                    left = lit_of(INT_MIN) if r.random() < 0.5 else self.int_expr(0, names)
            else:
                right = self.int_expr(depth - 1, names)
            return Binary(op, left, right)
        if roll < 0.72:
            return Unary(r.choice("-~"), self.int_expr(depth - 1, names))
        if roll < 0.82:
            return Call("b2i", (self.bool_expr(depth - 1, names),))
        if roll < 0.9:
            return Call("int_of", (Call("byte_of", (self.int_expr(depth - 1, names),)),))
        name = r.choice(("wrapping_add", "wrapping_sub", "wrapping_mul"))
        return Call(name, (self.int_expr(depth - 1, names), self.int_expr(depth - 1, names)))

    def bool_expr(self, depth: int, names: list[str]) -> Expr:
        r = self.r
        roll = r.random()
        if depth <= 0 or roll < 0.1:
            return BoolLit(r.random() < 0.5)
        if roll < 0.6:
            return Binary(r.choice(ORDER + EQUALITY), self.int_expr(depth - 1, names), self.int_expr(depth - 1, names))
        if roll < 0.75:
            return Binary(r.choice(LOGIC), self.bool_expr(depth - 1, names), self.bool_expr(depth - 1, names))
        if roll < 0.85:
            return Unary("!", self.bool_expr(depth - 1, names))
        byte = lambda: Call("byte_of", (self.int_expr(depth - 1, names),))  # noqa: E731
        return Binary(r.choice(EQUALITY), byte(), byte())

    def program(self) -> Program:
        r = self.r
        count = r.choice((0, 1, 1, 2, 3))
        vars_ = tuple((f"v{i}", self.value() if r.random() < 0.7 else r.choice(DIVISORS), r.random() < 0.5)
                      for i in range(count))
        names = [v[0] for v in vars_]
        lets = []
        for j in range(r.choice((1, 1, 2, 3))):
            lets.append(self.int_expr(r.choice((1, 2, 3, 4)), names))
            names.append(f"t{j}")
        return Program(vars_, tuple(lets), parens=r.random() < 0.5)


# ---------------------------------------------------------------------------- the harness


def module_text(programs: list[Program]) -> str:
    """Every program as `p<k>`, and a `run` that prints p<k>() for k >= the start on stdin."""
    # Each through a function value: `p<k>()` itself, a pure call on no arguments, would be
    # evaluated while compiling (check/callfold.py), and its trap refused rather than run.
    calls = "\n".join(f"    if start <= {k} {{\n        let f = p{k};\n        put_line(io, f());\n    }}"
                      for k in range(len(programs)))
    return ("edition 6;\n\n"
            "fn b2i(c: bool) -> [] int {\n    if c {\n        return 1;\n    }\n    return 0;\n}\n\n"
            + "\n\n".join(p.function(f"p{k}") for k, p in enumerate(programs))
            + f"\n\nfn run[&i](io: &!i Io) -> [io_read, io_write] int {{\n    let start = get_int(io);\n{calls}\n"
            "    return 0;\n}\n" + PUT_LINE + MAIN)


@dataclass
class Tally:
    programs: int = 0
    refused: int = 0
    trapped: int = 0
    valued: int = 0
    modules: int = 0
    runs: int = 0


def check_refusals(programs: list[Program]) -> None:
    """All programs in one module: exactly the ones the model calls all-literal traps are
    refused, each with `constant-traps` located inside its own function."""
    text = module_text(programs)
    result = api.check_sources([SourceFile("diff.cho", text)])
    lines = text.split("\n")
    starts = [i + 1 for i, l in enumerate(lines) if re.match(r"fn p\d+\(", l)]
    ends = [s + 1 + len(p.vars) + len(p.lets) + 1 for s, p in zip(starts, programs)]
    refused_at: dict[int, str] = {}
    for d in result.diagnostics:
        assert d.span is not None, diagnostics.render_text([d])
        owner = [k for k, (s, e) in enumerate(zip(starts, ends)) if s <= d.span.line <= e]
        assert owner and d.rule == "constant-traps", "unexpected refusal:\n" + diagnostics.render_text([d])
        refused_at[owner[0]] = d.message
    want = {k for k, p in enumerate(programs) if p.refused()}
    wrong = sorted(want ^ set(refused_at))
    assert not wrong, "\n\n".join(
        f"model says {'refused' if k in want else 'accepted'}, checker says "
        f"{refused_at.get(k, 'accepted')}:\n{programs[k].function(f'p{k}')}" for k in wrong)


def run_module(programs: list[Program], both: BothBackends, tally: Tally, where: str) -> None:
    """Compile the accepted programs as one module and run it from each start index."""
    compiled = api.compile_sources([SourceFile("diff.cho", module_text(programs))])
    assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
    found = re.findall(r".*\b(?:undef|poison)\b.*", native.optimized_ir(compiled.ir))
    assert not found, f"undefined values in the optimised IR: {found[:3]}"
    tally.modules += 1
    outcomes = [p.outcome() for p in programs]
    start = 0
    while start < len(programs):
        seen = both.run(compiled.ir, f"{start}\n".encode())
        tally.runs += 1
        stop = next((k for k in range(start, len(programs)) if outcomes[k] is None), len(programs))
        want = Observed(b"".join(f"{outcomes[k]}\n".encode() for k in range(start, stop)), b"",
                        TRAP if stop < len(programs) else 0)
        if seen != want:
            got_lines = seen.stdout.decode().split("\n")[:-1]
            k = start + next((i for i, line in enumerate(got_lines)
                              if start + i >= stop or line != str(outcomes[start + i])), len(got_lines))
            k = min(k, len(programs) - 1)
            pytest.fail(f"{where}: program p{k} disagrees with the model (model: "
                        f"{'trap' if outcomes[k] is None else outcomes[k]}; both backends: "
                        f"{seen}):\n{programs[k].function(f'p{k}')}")
        start = stop + 1


def differential(seed: int, modules: int, per_module: int, both: BothBackends) -> Tally:
    gen = Generator(seed)
    tally = Tally()
    for m in range(modules):
        programs = [gen.program() for _ in range(per_module)]
        check_refusals(programs)
        accepted = [p for p in programs if not p.refused()]
        tally.programs += len(programs)
        tally.refused += len(programs) - len(accepted)
        outcomes = [p.outcome() for p in accepted]
        tally.trapped += sum(o is None for o in outcomes)
        tally.valued += sum(o is not None for o in outcomes)
        if accepted:
            run_module(accepted, both, tally, f"seed {seed}, module {m}")
    return tally


# ---------------------------------------------------------------------------- the model itself


@pytest.mark.parametrize("a,op,b,want", [
    (-7, "/", 3, -2), (-7, "%", 3, -1), (7, "%", -3, 1), (7, "/", -3, -2), (INT_MIN, "%", -1, 0),
    (INT_MIN, "/", -1, None), (1, "/", 0, None), (1, "%", 0, None), (1, "<<", 63, INT_MIN),
    (1, "<<", 64, None), (1, ">>", -1, None), (-16, ">>", 2, -4), (-17, ">>", 2, -5),
    (INT_MAX, "+", 1, None), (INT_MIN, "-", 1, None), (3037000500, "*", 3037000500, None),
    (-2, "*", 1 << 62, INT_MIN), (3, "<<", 62, -(1 << 62)),
])
def test_model_matches_the_spec_examples(a, op, b, want):
    """language.md §4.6's own examples, so the model is pinned to the spec, not to our code."""
    try:
        got = evaluate(Binary(op, Lit(a, str(a)), Lit(b, str(b))), {})
    except Trapped:
        got = None
    assert got == want


def test_consteval_agrees_with_the_model_on_boundary_operands():
    """check/consteval.py (the folder's and the static evaluator's arithmetic) against the
    independent model, every operator on every pair of boundary operands."""
    from cancho_kernel.compiler.check import consteval

    values = INTERESTING + [-(1 << 31), -64, -63]
    for op in ARITH + SHIFTS + BITS + ORDER + EQUALITY:
        for a in values:
            for b in values:
                try:
                    want = evaluate(Binary(op, Lit(a, str(a)), Lit(b, str(b))), {})
                except Trapped:
                    want = "trap"
                try:
                    got = consteval.int_binary(op, a, b)
                except consteval.Trap:
                    got = "trap"
                assert got == want, (a, op, b)
    for a in values:
        try:
            want = evaluate(Unary("-", Lit(a, str(a))), {})
        except Trapped:
            want = "trap"
        try:
            got = consteval.int_neg(a)
        except consteval.Trap:
            got = "trap"
        assert got == want, a
        try:
            got = consteval.byte_of(a)
        except consteval.Trap:
            got = "trap"
        assert got == (a if 0 <= a <= 255 else "trap"), a


def test_model_refusal_rule():
    assert constant_trap(Binary("<<", Lit(1, "1"), Lit(64, "64"))) is True
    assert constant_trap(Binary("<<", Var("x"), Lit(64, "64"))) is False
    assert constant_trap(Binary("+", Var("x"), Binary("/", Lit(1, "1"), Lit(0, "0")))) is True
    assert constant_trap(Call("b2i", (Binary("<", Lit(1, "1"), Lit(2, "2")),))) is False


def test_rendering_with_fewest_parentheses_keeps_the_tree():
    e = Binary("-", Lit(1, "1"), Binary("-", Lit(2, "2"), Lit(3, "3")))
    assert render(e, False) == "1 - (2 - 3)"
    e = Binary("==", Binary("&", Var("a"), Lit(1, "1")), Lit(0, "0"))
    assert render(e, False) == "a & 1 == 0"
    e = Binary("<<", Binary("+", Var("a"), Lit(1, "1")), Lit(2, "2"))
    assert render(e, False) == "a + 1 << 2"


# ---------------------------------------------------------------------------- the runs


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield BothBackends(worker, tmp_path_factory.mktemp("diff"))
    worker.close()


def test_random_arithmetic_agrees_with_the_model(both):
    """Default run: 320 programs in 8 modules of 40."""
    t0 = time.perf_counter()
    tally = differential(seed=12, modules=8, per_module=40, both=both)
    print(f"\n{tally} in {time.perf_counter() - t0:.1f} s")
    assert tally.programs == 320
    # the generator must reach every outcome, or the test proves less than it claims
    assert tally.refused > 0 and tally.trapped > 0 and tally.valued > 0


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_random_arithmetic_agrees_with_the_model_many(both):
    """Under -m slow: at least 20,000 programs (CANCHO_DIFF_PROGRAMS to change it)."""
    total = int(os.environ.get("CANCHO_DIFF_PROGRAMS", "20000"))
    per_module = 80
    t0 = time.perf_counter()
    tally = differential(seed=20261201, modules=-(-total // per_module), per_module=per_module, both=both)
    print(f"\n{tally} in {time.perf_counter() - t0:.1f} s")
    assert tally.programs >= total
