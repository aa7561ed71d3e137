"""Integer and float semantics shared by the constant folder and the static evaluator.

These functions ARE the language's arithmetic: they must agree with what codegen emits, trap for
trap (runtime.md §3.2–3.3). A trap is signalled by raising `Trap` with a message that says why.
"""

from __future__ import annotations

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1


LITERALS = "the operands are literals, so this can only trap"


class Trap(Exception):
    """The operation would trap at run time. The message is the constant folder's (it adds that
    the operands are literals, runtime.md §3.3); `reason` is the bare why, for callers whose
    operands are not literals (the static evaluator)."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason if reason is not None else message


def _trap(reason: str) -> Trap:
    return Trap(f"{reason}; {LITERALS}", reason)


def wrap(v: int) -> int:
    """Two's-complement wrap to 64 bits."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= (1 << 63) else v


def _checked(v: int, what: str) -> int:
    if v < INT_MIN or v > INT_MAX:
        raise _trap(f"this {what} overflows")
    return v


def int_binary(op: str, a: int, b: int) -> int | bool:
    """Evaluate an int operator exactly as the backend does, raising Trap where it traps."""
    if op == "+":
        return _checked(a + b, "addition")
    if op == "-":
        return _checked(a - b, "subtraction")
    if op == "*":
        return _checked(a * b, "multiplication")
    if op in ("/", "%"):
        if b == 0:
            raise _trap("this divides by zero")
        if b == -1:
            if op == "%":
                return 0
            if a == INT_MIN:
                raise _trap("this division overflows")
            return -a
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        return q if op == "/" else a - q * b
    if op in ("<<", ">>"):
        if b < 0 or b > 63:
            raise _trap("this shift amount is outside 0..63")
        return wrap(a << b) if op == "<<" else a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise ValueError(op)


def int_neg(a: int) -> int:
    return _checked(-a, "negation")


def byte_of(n: int) -> int:
    if n < 0 or n > 255:
        raise Trap(f"`byte_of({n})` is outside 0..255; the argument is a literal, so this can only trap",
                   f"`byte_of({n})` is outside 0..255")
    return n
