"""The one builtin registry (check/builtins.py): every builtin visible at some edition is either
supported — checked, with a registered lowering and a registered compile-time evaluation (or an
explicit refusal for those that need a capability) — or refused at its call as
`unsupported-on-target`, never as `internal` from the code generator. A builtin that is checked
but not lowered (`UNLOWERED`) is refused only once the rest of the program is accepted.

Since issue 14 every builtin of editions 1 to 8 is supported; the two refusal paths stay for a
builtin the reference adds later, and are tested here with the registry patched to lack one."""

from __future__ import annotations

import pytest

import cancho_kernel.compiler.check.evaluate  # noqa: F401  (registers the evaluations)
import cancho_kernel.compiler.codegen.builtins  # noqa: F401  (registers the lowerings)
from cancho_kernel.compiler import api
from cancho_kernel.compiler.check import builtins as registry
from cancho_kernel.compiler.check.builtins import (BUILTINS, EVALUATIONS, LOWERINGS, UNLOWERED, Builtin,
                                                   Implementations)
from cancho_kernel.compiler.check.signatures import builtin_signature
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.source import SourceFile
from test_undefined_behaviour import TRAP, both, jit_worker  # noqa: F401  (fixtures)

SUPPORTED = sorted(n for n, b in BUILTINS.items() if b.supported)
UNSUPPORTED = sorted(n for n, b in BUILTINS.items() if not b.supported)
UNCHECKED = sorted(n for n, b in BUILTINS.items() if not b.checked)


# Builtins with an ordinary signature, made to look unchecked or unlowered by the tests below.
SAMPLE = ("popcount", "conn_read", "dir_stat", "pipe_read", "udp_send")


@pytest.fixture
def lacking(monkeypatch):
    """Patch the registry: ``lacking(name, "signature")`` as if this compiler had neither a
    signature nor code for `name`; ``lacking(name, "lowering")`` as if it had no code."""
    def patch(name: str, what: str) -> str:
        if what == "signature":
            monkeypatch.setitem(BUILTINS, name, Builtin(name, BUILTINS[name].edition, None))
        else:
            monkeypatch.setattr(registry, "UNLOWERED", frozenset({name}))
        return name
    return patch


def test_every_builtin_of_every_edition_is_supported():
    """Issue 14: nothing a program of editions 1 to 8 calls is "not supported yet"."""
    assert SUPPORTED and UNSUPPORTED == [] and UNCHECKED == [] and UNLOWERED == frozenset()


def test_every_supported_builtin_is_lowered_and_evaluated():
    assert [n for n in SUPPORTED if LOWERINGS.get(n) is None] == []
    assert [n for n in SUPPORTED if EVALUATIONS.get(n) is None] == []


def test_nothing_is_registered_for_an_unsupported_builtin():
    assert set(LOWERINGS) <= set(SUPPORTED)
    assert set(EVALUATIONS) <= set(SUPPORTED)


def test_registration_refuses_unknown_and_duplicate_names(lacking):
    table = Implementations("test")
    table.register("len")(lambda: 0)
    with pytest.raises(ValueError):
        table.register("len")(lambda: 1)
    with pytest.raises(ValueError):
        table.register(lacking("popcount", "lowering"))(lambda: 1)  # visible, unsupported
    with pytest.raises(ValueError):
        table.register("no_such_builtin")(lambda: 1)


def test_an_unlowered_builtin_is_checked_and_not_supported(lacking):
    name = lacking("conn_read", "lowering")
    assert BUILTINS[name].checked and not BUILTINS[name].supported


def test_signatures_parse_at_their_edition():
    for n in sorted(n for n, b in BUILTINS.items() if b.checked):
        b = BUILTINS[n]
        if b.signature is not None:
            assert builtin_signature(n, b.edition) is not None, n


def call_program(name: str, edition: int) -> str:
    return (f"edition {edition};\n\nfn main(world: World) -> [] int {{\n    release(world);\n"
            f"    let x = {name}();\n    return 0;\n}}\n")


@pytest.mark.parametrize("name", SAMPLE)
def test_an_unsupported_builtin_is_refused_at_its_call(name: str, lacking):
    lacking(name, "signature")
    edition = BUILTINS[name].edition
    result = api.check_sources([SourceFile("u.cho", call_program(name, edition))])
    assert not result.ok
    first = result.diagnostics[0]
    assert first.rule == Rule.UNSUPPORTED_ON_TARGET, (name, first.rule, first.message)
    assert (first.span.line, first.span.column) == (5, 13), name
    assert f"`{name}`" in first.message


TEXT = "abca" + "x" * 65 + "a"
MASK_PROGRAM = """edition 8;

fn yn[&i](io: &!i Io, ok: bool) -> [io_write] int {
    if ok { putchar(io, 'Y'); } else { putchar(io, 'N'); }
    return 0;
}

static MASK: [int] {
    let t = "TEXT";
    let out = alloc_slice[static](3, 0);
    out[0] = byte_mask64(t, 0, byte_of(97));
    out[1] = byte_mask64(t, 6, byte_of(97));
    out[2] = byte_mask64(t, 6, byte_of(120));
    return out;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(clock);
    release(signals); release(exec);
    let t = "TEXT";
    borrow mut io as &!i in {
        yn(i, byte_mask64(t, 0, byte_of(97)) == 9);
        yn(i, byte_mask64(t, 6, byte_of(97)) == -9223372036854775807 - 1);
        yn(i, byte_mask64(t, 6, byte_of(120)) == 9223372036854775807);
        yn(i, MASK[0] == 9 && MASK[1] == -9223372036854775807 - 1 && MASK[2] == 9223372036854775807);
        putchar(i, '\\n');
        match flush_out(i) {
            Done::Ok(_) => { }
            Done::Failed(_) => { }
        }
    }
    release(io);
    return byte_mask64(t, 7, byte_of(97));
}
""".replace("TEXT", TEXT)


def test_byte_mask64_checks_lowers_evaluates_and_runs(both):
    """It had a signature and no lowering (`cancho check` answered `internal` at `main`)."""
    result = api.compile_sources([SourceFile("mask.cho", MASK_PROGRAM)])
    assert result.ok, result.diagnostics
    seen = both.run(result.ir)  # exe and jit agree byte for byte
    assert seen.stdout == b"YYYY\n" and seen.status == TRAP, seen  # at 7 the window passes the end


@pytest.mark.parametrize("name", SAMPLE)
def test_an_unlowered_builtin_is_checked_before_it_is_refused(name: str, lacking):
    """The same zero-argument call that refuses an unchecked builtin at once is typed through
    an unlowered builtin's signature, so another rule (arity, type, linearity) fires first."""
    lacking(name, "lowering")
    edition = BUILTINS[name].edition
    result = api.check_sources([SourceFile("u.cho", call_program(name, edition))])
    assert not result.ok
    assert result.diagnostics[0].rule != Rule.UNSUPPORTED_ON_TARGET, (name, result.diagnostics[0].message)


def test_an_otherwise_valid_program_with_an_unlowered_call_never_reaches_codegen(lacking):
    source = """edition 5;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(io);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    release(clock);
    borrow net as &n in {
        match tcp_listen(n, 8080, 16, 0) {
            Listening::Ok(l) => {
                listener_close(l);
            }
            Listening::Failed(e) => { }
        }
    }
    release(net);
    return 0;
}
"""
    lacking("tcp_listen", "lowering")
    result = api.compile_sources([SourceFile("p.cho", source)])
    assert not result.ok and result.ir is None
    first = result.diagnostics[0]
    assert first.rule == Rule.UNSUPPORTED_ON_TARGET and "`tcp_listen` is not supported by cancho-kernel" in first.message
    assert (first.span.line, first.span.column) == (12, 15)


# -- every compile-time evaluation agrees with its builtin's signature -----------------------------

from itertools import product  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from cancho_kernel.compiler.check.consteval import Trap  # noqa: E402
from cancho_kernel.compiler.check.types import BOOL, BYTE, F32, FLOAT, INT  # noqa: E402
from cancho_kernel.compiler.diagnostics import Refusal  # noqa: E402
from cancho_kernel.compiler.source import Span  # noqa: E402

_INF, _NAN = float("inf"), float("nan")
# Values a static may hand an evaluation, per parameter type, edges included.
_SAMPLES = {
    INT: (0, 1, -1, 7, 255, 256, 2**31, 2**63 - 1, -(2**63)),
    BYTE: (0, 1, 127, 128, 255),
    BOOL: (False, True),
    FLOAT: (0.0, -0.0, 1.5, -2.5, 1e300, -1e-310, _INF, -_INF, _NAN),
    F32: (0.0, -0.0, 1.5, -2.5, 3.4028234663852886e38, _INF, _NAN),
}


def _in_type(value, ty) -> bool:
    """Whether `value` is a value of the scalar type `ty` as the evaluator represents it."""
    import struct
    if ty is BOOL:
        return isinstance(value, bool)
    if ty is INT:
        return type(value) is int and -(2**63) <= value < 2**63
    if ty is BYTE:
        return type(value) is int and 0 <= value <= 255
    if ty is FLOAT:
        return type(value) is float
    if ty is F32:  # held as the double it widens to exactly
        return type(value) is float and (value != value or struct.unpack("<f", struct.pack("<f", value))[0] == value)
    raise AssertionError(ty)


def _scalar_evaluations() -> list[tuple[str, object]]:
    out = []
    for name in sorted(EVALUATIONS):
        sig = builtin_signature(name, 8)
        if sig is not None and all(t in _SAMPLES for _, t in sig.params) and sig.ret in _SAMPLES:
            out.append((name, sig))
    return out


def test_scalar_evaluations_are_found():
    names = {n for n, _ in _scalar_evaluations()}
    assert {"wrapping_add", "byte_of", "int_of", "truncate", "sqrt32", "popcount", "is_nan"} <= names


@pytest.mark.parametrize("name,sig", _scalar_evaluations(), ids=[n for n, _ in _scalar_evaluations()])
def test_each_evaluation_answers_in_its_signatures_return_type(name, sig):
    """An evaluation registered under the wrong builtin, or returning the wrong kind of value
    (an int where the signature says bool, a byte out of range, a double that is no f32), would
    make a static disagree with the program at run time; every input of the parameter types either
    yields a value of the return type, traps (`constant-traps`/static-item at the static), or is
    refused because the builtin needs the system (sockets)."""
    evaluation = EVALUATIONS.get(name)
    span = Span(SourceFile("<t>", "x"), 0, 1)
    call = SimpleNamespace(span=span, callee=SimpleNamespace(name=name, span=span))
    results = 0
    for args in product(*(_SAMPLES[t] for _, t in sig.params)):
        try:
            value = evaluation(list(args), call)
        except Trap:
            continue
        except Refusal as r:
            assert r.diagnostic.rule == Rule.STATIC_ITEM, (name, args, r)
            continue
        results += 1
        assert _in_type(value, sig.ret), f"{name}{args} = {value!r}, not a {sig.ret}"
    if name not in ("accept", "listen", "trap", "hw_aes_gcm"):  # refused at compile time, or trapping by design
        assert results, f"{name} answered no input of its parameter types"
