"""std.fmt32 against oracles computed exactly in Python, on pseudo-random `f32` bit patterns and
on decimals placed a hair either side of binary32 rounding midpoints.

* `f32_into` must give the shortest digits (numpy's float32 repr is the digit oracle) laid out as
  Rust's `{:?}` lays them out, and the text must read back (exactly, with `fractions`) as the
  same value.
* `f32_fixed_into` must equal the exact value rounded half to even at N places.
* `f32_of_text` must give the nearest binary32 of the exact decimal (the compiler's own
  literal rounding, `lexer.f32_bits_of`, which works on `Fraction`s).

One generated program per test, compiled once, run on the exe backend.
"""

from __future__ import annotations

import random
import struct
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends.exe import build_executable
from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget, run_executable
from cancho_kernel.compiler.lexer import exact_decimal, f32_bits_of

HEADER = """edition 6;
import std.fmt32;
import std.io;

fn show[&i](io: &!i Io, x: f32, prec: int) -> [io_write] int {
    region a {
        let buf = alloc_slice[a](120, byte_of(0));
        let n = fmt32.f32_into(buf, x);
        io.write_all(io, buf[0..n]);
        io.space(io);
        let m = fmt32.f32_fixed_into(buf, x, prec);
        io.write_all(io, buf[0..m]);
        io.newline(io);
    }
    return 0;
}

fn read[&i, &t](io: &!i Io, text: &t [byte]) -> [io_write] int {
    let (ok, x) = fmt32.f32_of_text(text);
    if ok {
        io.print_int(io, bits_of32(x));
    } else {
        io.write_all(io, "err");
    }
    io.newline(io);
    return 0;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    release(net);
    release(clock);
    release(signals);
    borrow mut io as &!i in {
"""
FOOTER = """    }
    release(io);
    return 0;
}
"""


def run_program(tmp_path: Path, body: list[str]) -> list[str]:
    source = HEADER + "".join(f"        {line}\n" for line in body) + FOOTER
    path = tmp_path / "oracle.cho"
    path.write_text(source)
    result = api.compile_sources([api.SourceFile.from_path(path)])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    exe = tmp_path / "oracle"
    build_executable(result.ir, exe)
    res = run_executable(exe, [str(exe)], b"", StdoutTarget.pipe(), RunLimits(timeout=120))
    assert res.exit_status == 0, res.describe()
    return res.stdout.decode().splitlines()


def value(bits: int) -> Fraction:
    """The exact value of a finite binary32 pattern."""
    sign = -1 if bits >> 31 else 1
    biased, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if biased == 0:
        return sign * Fraction(frac, 2 ** 149)
    return sign * Fraction(frac | 0x800000) * Fraction(2) ** (biased - 150)


def nearest_bits(text: str) -> int:
    """The binary32 pattern nearest a decimal, exactly (overflow is infinity)."""
    negative = text.startswith("-")
    b = f32_bits_of(exact_decimal(text.lstrip("+-")))
    return (0x7F800000 if b is None else b) | (0x80000000 if negative else 0)


def rust_debug(bits: int) -> str:
    """Rust's `{:?}` of an f32, from numpy's shortest digits."""
    x = np.frombuffer(struct.pack("<I", bits), dtype=np.float32)[0]
    if np.isnan(x):
        return "NaN"
    if np.isinf(x):
        return "-inf" if x < 0 else "inf"
    sign = "-" if bits >> 31 else ""
    if x == 0:
        return sign + "0.0"
    mantissa, exp = np.format_float_scientific(abs(x), unique=True, trim="-").split("e")
    digits = mantissa.replace(".", "")
    k = int(exp) + 1  # x = 0.digits * 10^k
    # numpy breaks an exact tie between two shortest candidates towards the even digit, Rust
    # towards the larger one.
    unit = Fraction(10) ** (k - len(digits))
    if abs(value(bits)) - int(digits) * unit == unit / 2:
        up = str(int(digits) + 1)
        upper_exp = k - len(digits)
        if nearest_bits(f"{up}e{upper_exp}") == bits & 0x7FFFFFFF:
            digits, k = up.rstrip("0"), k + (len(up) - len(digits))
    if abs(x) < np.float32(1e-4) or abs(x) >= np.float32(1e16):
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{k - 1}"
    if k <= 0:
        return f"{sign}0.{'0' * -k}{digits}"
    if k < len(digits):
        return f"{sign}{digits[:k]}.{digits[k:]}"
    return f"{sign}{digits}{'0' * (k - len(digits))}.0"


def rust_fixed(bits: int, prec: int) -> str:
    """Rust's `{:.prec}` of a finite f32: exact value, half to even, sign kept."""
    v = value(bits)
    with localcontext() as ctx:
        ctx.prec = 400
        exact = Decimal(abs(v.numerator)) / Decimal(v.denominator)
        text = f"{exact.quantize(Decimal(1).scaleb(-prec), rounding=ROUND_HALF_EVEN):f}"
    return ("-" if bits >> 31 else "") + text


def random_patterns(rng: random.Random, n: int) -> list[int]:
    """Finite patterns: uniform bits, plus subnormals and powers of two (the lopsided case)."""
    out: list[int] = []
    while len(out) < n:
        kind = rng.randrange(4)
        if kind == 0:
            b = rng.randrange(1 << 23)
        elif kind == 1:
            b = rng.randrange(1, 255) << 23
        else:
            b = rng.randrange(0x7F800000)
        out.append(b | (rng.randrange(2) << 31))
    return out


def test_printing_matches_the_oracles(tmp_path: Path) -> None:
    rng = random.Random(32)
    patterns = random_patterns(rng, 400)
    precs = [rng.choice([0, 1, 2, 3, 6, 9, 20, 60]) for _ in patterns]
    lines = run_program(tmp_path, [f"show(i, f32_of_bits({b}), {p});" for b, p in zip(patterns, precs)])
    assert len(lines) == len(patterns)
    for b, p, line in zip(patterns, precs, lines):
        debug, fixed = line.split(" ")
        assert debug == rust_debug(b), (b, line)
        assert nearest_bits(debug.replace("e", "E") if "e" in debug else debug) == b, (b, debug)
        assert fixed == rust_fixed(b, p), (b, p, line)


def midpoint_texts(rng: random.Random, n: int) -> list[str]:
    """Decimals exactly on, or one unit of a long last digit either side of, the midpoint
    between two neighbouring f32s: where reading through binary64 goes wrong."""
    out: list[str] = []
    for _ in range(n):
        b = rng.randrange(1, 0x7F7FFFFF)
        mid = (value(b) + value(b + 1)) / 2
        with localcontext() as ctx:
            ctx.prec = 200
            exact = Decimal(mid.numerator) / Decimal(mid.denominator)
            digits = rng.choice([0, 30, 60])
            if digits == 0:
                out.append(f"{exact:e}")
                continue
            step = Decimal(1).scaleb(exact.adjusted() - digits)
            out.append(f"{exact.quantize(step) + rng.choice([-step, step]):e}")
    return out


def test_reading_matches_the_exact_rounding(tmp_path: Path) -> None:
    rng = random.Random(6)
    texts = midpoint_texts(rng, 150)
    texts += [f"{rng.randrange(1, 10 ** rng.randrange(1, 25))}e{rng.randrange(-70, 50)}" for _ in range(150)]
    texts += ["0.1", "1e39", "1e-46", "7.006492321624085e-46", "340282356779733661637539395458142568448",
              "340282356779733661637539395458142568447.999", "-0", "00012.50e-1"]
    lines = run_program(tmp_path, [f'read(i, "{t}");' for t in texts])
    assert len(lines) == len(texts)
    for t, line in zip(texts, lines):
        assert int(line) == nearest_bits(t), (t, line)
