"""The P-256 family (std.p256, p256_kernels, p256_comb, p256_pt, p256_vf, ecdh, ecdsa,
ecdsa_sign) beyond its `cancho test` files in tests/std/.

* the generated modules are what scripts/p256_gen.py prints, and its `--check` sees a change;
* the point formulas respect std.p256's bounds: every `subK` gets a subtrahend below K p, every
  product inputs below 4096 p, and a point's coordinates come out within the bound they went
  in with (read from the cancho source, so a formula edited without its bound fails here);
* the arithmetic against Python's int (p256_driver.cho);
* ECDH, verification and signing against OpenSSL through Python's `cryptography`, both ways:
  keys and shared secrets equal, OpenSSL's signatures accepted here (raw and DER) and
  refused when changed, signatures made here accepted there, and with no added randomness
  equal bit for bit to OpenSSL's RFC 6979 deterministic ones;
* (slow) constant time: under valgrind's lackey, the trace of every instruction executed in
  the program's own code and every address it loads or stores is identical for different
  scalars in ECDH's public key and shared secret, and for different private keys in signing
  (so no branch and no address depends on the secret), while ECDSA verification, which is
  allowed to, gives different traces;
* (slow) a measurement against OpenSSL: CPU time per operation here and there, their ratio
  printed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends.exe import build_executable
from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget, run_executable

ROOT = Path(__file__).resolve().parent.parent
STD = ROOT / "cancho_kernel" / "std"
STD_TESTS = Path(__file__).resolve().parent / "std"
P = 2**256 - 2**224 + 2**192 + 2**96 - 1
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
R = 2**280
N384 = int("ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973", 16)


def build(tmp_path: Path, source: Path, name: str = "driver") -> Path:
    result = api.compile_sources([api.SourceFile.from_path(source)])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    exe = tmp_path / name
    build_executable(result.ir, exe)
    return exe


def run(exe: Path, stdin: bytes, timeout: float = 300) -> bytes:
    res = run_executable(exe, [str(exe)], stdin, StdoutTarget.pipe(), RunLimits(timeout=timeout, max_output=None))
    assert res.exit_status == 0, res.describe()
    return res.stdout


# ---------------------------------------------------------------------------------------------
# the generator


def _generator():
    spec = importlib.util.spec_from_file_location("p256_gen", ROOT / "scripts" / "p256_gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_modules_are_what_the_script_prints(tmp_path: Path) -> None:
    gen = _generator()
    assert gen.main(["--check"]) == 0
    # A changed copy is seen.
    for name in ("p256_kernels.cho", "p256_comb.cho"):
        shutil.copy(STD / name, tmp_path / name)
    text = (tmp_path / "p256_kernels.cho").read_text()
    (tmp_path / "p256_kernels.cho").write_text(text.replace("268435455", "268435454", 1))
    gen.STD = tmp_path
    assert gen.main(["--check"]) == 1


def test_generated_constants_are_the_curves() -> None:
    gen = _generator()
    consts = dict(gen.CONSTANTS)
    assert consts["r2"] == R * R % P and consts["n_r2"] == R * R % N
    assert consts["b_mont"] * pow(R, -1, P) % P == 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
    assert all(sum(v << (28 * i) for i, v in enumerate(gen.limbs(x))) == x for x in consts.values())


# ---------------------------------------------------------------------------------------------
# the formulas' bounds

CALL = re.compile(r"^\s*(?:return )?p256\.(\w+)\(w, (.*)\);$")


def _body(source: str, name: str) -> list[str]:
    start = re.search(rf"\n(pub )?fn {name}\[", source).start()
    return source[start:source.index("\n}\n", start)].splitlines()


def _args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return out + [cur.strip()]


def _simulate(lines: list[str], bound: float) -> tuple[dict[str, float], list[str]]:
    """Upper bounds (in units of p) of every element the formula writes, starting from `bound`
    for anything it reads first; and the violations of std.p256's preconditions."""
    vals: dict[str, float] = {"b": 1.0, "p256.b_mont()": 1.0, "p256.one_mont()": 1.0}
    bad = []
    get = lambda k: vals.get(k, bound)  # noqa: E731
    for line in lines:
        m = CALL.match(line)
        if not m:
            continue
        op, args = m.group(1), _args(m.group(2))
        if op in ("mul", "sqr"):
            a, b = get(args[0]), get(args[1 if op == "mul" else 0])
            if a >= 4096 or b >= 4096:
                bad.append(f"{line.strip()}: an input above 4096 p")
            vals[args[-1]] = a * b * P / R + 1
        elif op == "add":
            vals[args[2]] = get(args[0]) + get(args[1])
        elif op.startswith("sub"):
            k = int(op[3:])
            if get(args[1]) > k:
                bad.append(f"{line.strip()}: subtrahend below {get(args[1]):.3f} p, not below {k} p")
            vals[args[2]] = get(args[0]) + k
        elif op == "copy":
            vals[args[1]] = get(args[0])
        if any(v >= 2**24 for v in vals.values()):
            bad.append(f"{line.strip()}: a value past 2^280")
    return vals, bad


@pytest.mark.parametrize("module, name, bound, outputs", [
    ("p256_pt", "add_points", 4.01, ["x3", "y3", "z3"]),
    ("p256_pt", "mixed_add", 4.01, ["x3", "y3", "z3"]),
    ("p256_pt", "double_point", 4.01, ["x3", "y3", "z3"]),
    ("p256_pt", "on_curve_xy", 4.01, []),
    ("p256_vf", "double", 32, ["x_of(d)", "y_of(d)", "z_of(d)"]),
    ("p256_vf", "add_jac", 32, ["x_of(d)", "y_of(d)", "z_of(d)"]),
    ("p256_vf", "madd", 32, ["x_of(d)", "y_of(d)", "z_of(d)"]),
])
def test_point_formulas_keep_the_bounds(module: str, name: str, bound: float, outputs: list[str]) -> None:
    lines = _body((STD / f"{module}.cho").read_text(), name)
    assert sum(bool(CALL.match(line)) for line in lines) > 8, "the formula was not found"
    vals, bad = _simulate(lines, bound)
    assert not bad, "\n".join(bad)
    for out in outputs:
        assert vals[out] <= bound, f"{out} comes out below {vals[out]:.2f} p, above the {bound} p it went in with"


def test_the_bound_check_sees_a_subtraction_too_small() -> None:
    lines = _body((STD / "p256_pt.cho").read_text(), "add_points")
    changed = [line.replace("p256.sub32(", "p256.sub16(") for line in lines]
    assert changed != lines
    assert _simulate(changed, 4)[1]


# ---------------------------------------------------------------------------------------------
# the arithmetic against Python's int

def _field_want(op: int, x: int, y: int) -> int:
    return {0: lambda: x * y % P, 1: lambda: x * x % P, 2: lambda: (x + y) % P, 3: lambda: (x - y) % P,
            4: lambda: pow(x, -1, P), 5: lambda: x * y % N, 6: lambda: pow(x, -1, N), 7: lambda: x % N,
            8: lambda: (x + y) % N, 9: lambda: x * x % N, 10: lambda: 32 * (x - y) % P}[op]()


def test_arithmetic_against_python_int(tmp_path: Path) -> None:
    rnd = random.Random(256)
    cases = []
    for op in range(11):
        m = N if op in (5, 6, 8, 9) else P
        pairs = [(1, 1), (m - 1, m - 1), (0, m - 1), (m - 1, 0), (2**255, 3)]
        pairs += [(rnd.randrange(m), rnd.randrange(m)) for _ in range(40)]
        for x, y in pairs:
            if op == 7:
                x = rnd.choice([2**256 - 1, rnd.getrandbits(256), N, N - 1])
            if op in (4, 6) and x % m == 0:
                continue
            cases.append((op, x, y))
    out = run(build(tmp_path, STD_TESTS / "p256_driver.cho"),
              b"".join(bytes([op]) + x.to_bytes(32, "big") + y.to_bytes(32, "big") for op, x, y in cases))
    assert len(out) == 32 * len(cases)
    bad = [(op, hex(x), hex(y)) for k, (op, x, y) in enumerate(cases)
           if int.from_bytes(out[32 * k:32 * k + 32], "big") != _field_want(op, x, y)]
    assert not bad, bad[:10]


# ---------------------------------------------------------------------------------------------
# against OpenSSL

def _record(op: int, curve: int, *fields: bytes) -> bytes:
    fields = fields + (b"",) * (4 - len(fields))
    return bytes([op]) + curve.to_bytes(2, "little") + b"".join(len(f).to_bytes(2, "little") + f for f in fields)


def _out_len(op: int, curve: int) -> int:
    return {0: 1 + curve // 4, 1: curve // 8, 4: 64, 5: 64, 6: 72}.get(op, 0)


def _answers(exe: Path, records: list[tuple]) -> list[tuple[int, bytes]]:
    out = run(exe, b"".join(_record(*r) for r in records))
    res, at = [], 0
    for r in records:
        n = _out_len(r[0], r[1] & 0x7FFF)
        res.append((out[at] - 128, out[at + 1:at + 1 + n]))
        at += 1 + n
    assert at == len(out)
    return res


@pytest.fixture(scope="module")
def ecc_exe(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("ecc"), STD_TESTS / "ecc_driver.cho", "ecc")


class _Cases:
    """Records for ecc_driver.cho and, beside each, the answer OpenSSL says it must give."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.checks: list = []

    def add(self, record: tuple, check) -> None:
        self.records.append(record)
        self.checks.append(check)


def _key_cases(cases: _Cases, ec, ser, curve: int, rnd: random.Random) -> None:
    size = curve // 8
    cls = {256: ec.SECP256R1, 384: ec.SECP384R1}[curve]
    point = lambda k: k.public_key().public_bytes(ser.Encoding.X962, ser.PublicFormat.UncompressedPoint)  # noqa: E731
    for scalar in [1, 2, N - 1 if curve == 256 else 3] + [rnd.randrange(1, 2**curve) for _ in range(16)]:
        try:
            key = ec.derive_private_key(scalar, cls())
        except ValueError:
            continue
        peer = ec.derive_private_key(rnd.randrange(1, N if curve == 256 else N384), cls())
        d = scalar.to_bytes(size, "big")
        cases.add((0, curve, d), lambda c, o, want=point(key): c == 0 and o == want)
        cases.add((1, curve, d, point(peer)),
                  lambda c, o, want=key.exchange(ec.ECDH(), peer.public_key()): c == 0 and o == want)


def _signature_cases(cases: _Cases, ec, ser, hashes, utils, curve: int, rnd: random.Random) -> None:
    size = curve // 8
    cls, h = {256: (ec.SECP256R1, hashes.SHA256), 384: (ec.SECP384R1, hashes.SHA384)}[curve]
    for _ in range(20):
        key = ec.derive_private_key(rnd.randrange(1, N if curve == 256 else N384), cls())
        q = key.public_key().public_bytes(ser.Encoding.X962, ser.PublicFormat.UncompressedPoint)
        digest = hashlib.new(h.name, rnd.randbytes(rnd.randint(0, 90))).digest()
        der = key.sign(digest, ec.ECDSA(utils.Prehashed(h())))
        r, s = utils.decode_dss_signature(der)
        raw = r.to_bytes(size, "big") + s.to_bytes(size, "big")
        cases.add((2, curve, digest, q, raw), lambda c, o: c == 0)
        cases.add((3, curve, digest, q, der), lambda c, o: c == 0)
        flipped = bytearray(raw)
        flipped[rnd.randrange(len(raw))] ^= 1 << rnd.randrange(8)
        cases.add((2, curve, digest, q, bytes(flipped)), lambda c, o: c in (-41, -38, -39))
        cases.add((2, curve, bytes([digest[0] ^ 1]) + digest[1:], q, raw), lambda c, o: c == -41)
        if curve != 256:
            continue
        d = key.private_numbers().private_value.to_bytes(32, "big")
        want = utils.decode_dss_signature(key.sign(digest, ec.ECDSA(utils.Prehashed(h()), deterministic_signing=True)))
        cases.add((4, 256, digest, d, b""),
                  lambda c, o, want=want: c == 0 and (int.from_bytes(o[:32], "big"), int.from_bytes(o[32:], "big")) == want)

        def verifies_there(c: int, o: bytes, pub=key.public_key(), digest=digest) -> bool:
            sig = utils.encode_dss_signature(int.from_bytes(o[:32], "big"), int.from_bytes(o[32:], "big"))
            pub.verify(sig, digest, ec.ECDSA(utils.Prehashed(h())))  # raises when it does not verify
            return c == 0
        cases.add((4, 256, digest, d, rnd.randbytes(32)), verifies_there)
        cases.add((5, 256, digest, d, rnd.randbytes(32), q), verifies_there)


def test_ecdh_and_ecdsa_against_openssl(ecc_exe: Path) -> None:
    ec = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")
    ser = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    hashes = pytest.importorskip("cryptography.hazmat.primitives.hashes")
    utils = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.utils")
    rnd = random.Random(6979)
    cases = _Cases()
    for curve in (256, 384):
        _key_cases(cases, ec, ser, curve, rnd)
        _signature_cases(cases, ec, ser, hashes, utils, curve, rnd)
    answers = _answers(ecc_exe, cases.records)
    bad = [f"op {r[0]} P-{r[1]}: code {c}, {o.hex()[:32]}" for r, check, (c, o) in zip(cases.records, cases.checks, answers)
           if not check(c, o)]
    assert not bad, f"{len(bad)} of {len(cases.records)}:\n" + "\n".join(bad[:10])


def test_short_work_is_refused_in_every_entry(ecc_exe: Path) -> None:
    """`work` one word short: each entry answers its own code, none traps."""
    short = 0x8000
    records = [(0, 256 | short, b"\x01" * 32), (1, 384 | short, b"\x01" * 48, b"\x04"),
               (2, 256 | short, b"", b"", b""), (3, 384 | short, b"", b"", b""),
               (4, 256 | short, b"\x01" * 32, b"\x01" * 32, b"")]
    assert [c for c, _ in _answers(ecc_exe, records)] == [-51, -51, -42, -42, -75]


# ---------------------------------------------------------------------------------------------
# constant time, under valgrind's lackey

PIE_BASE = 0x108000  # where valgrind maps a position-independent executable


def _text_range(exe: Path) -> tuple[int, int]:
    out = subprocess.run(["readelf", "-lW", str(exe)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "LOAD" and "E" in parts[-2]:
            start = int(parts[2], 16)
            return PIE_BASE + start, PIE_BASE + start + int(parts[5], 16)
    raise AssertionError("no executable segment")


def _trace(exe: Path, stdin: bytes) -> tuple[str, int, bytes]:
    """The hash and length of lackey's trace restricted to the program's own code: each
    instruction's address, and each load and store (address and size) it makes."""
    lo, hi = _text_range(exe)
    read, write = os.pipe()
    proc = subprocess.Popen(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={write}", str(exe)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(write,))
    os.close(write)
    digest, count, keep = hashlib.sha256(), 0, False
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
        with os.fdopen(read, "rb", buffering=1 << 20) as log:
            for line in log:
                if line.startswith(b"I"):
                    keep = lo <= int(line[3:line.index(b",")], 16) < hi
                elif not line.startswith(b" "):
                    continue
                if keep:
                    digest.update(line)
                    count += 1
        out = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
    return digest.hexdigest(), count, out


@pytest.mark.slow
def test_scalar_multiplication_is_constant_time(tmp_path: Path, monkeypatch) -> None:
    if not shutil.which("valgrind") or not shutil.which("readelf"):
        pytest.fail("valgrind and readelf are needed (installed by .ci/run)")
    # valgrind decodes no AVX-512: the generic CPU's code.
    monkeypatch.setenv("CANCHO_CPU", "baseline")
    exe = build(tmp_path, STD_TESTS / "ct_driver.cho", "ct")
    g = bytes.fromhex("046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"
                      "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")
    scalars = [1, N - 1, random.Random(3).randrange(1, N)]
    traces = [_trace(exe, k.to_bytes(32, "big") + g + b"\x00") for k in scalars]
    outs = {t[2] for t in traces}
    assert len(outs) == 3, "the scalars gave the same keys: the trace compared nothing"
    assert traces[0][1] > 1_000_000, traces[0][1]
    assert len({(h, n) for h, n, _ in traces}) == 1, [(n, h[:12]) for h, n, _ in traces]
    # Signing: the same for different private keys (the nonce, HMAC-DRBG over the key, too).
    signs = [_trace(exe, k.to_bytes(32, "big") + g + b"\x02") for k in scalars]
    assert len({t[2] for t in signs}) == 3
    assert len({(h, n) for h, n, _ in signs}) == 1, [(n, h[:12]) for h, n, _ in signs]
    # The method sees a difference where one is allowed: verification branches on its scalars.
    verify = [_trace(exe, k.to_bytes(32, "big") + g + b"\x01")[:2] for k in scalars[:2]]
    assert verify[0] != verify[1]


# ---------------------------------------------------------------------------------------------
# a measurement against OpenSSL


def _openssl_seconds(ec, hashes, utils, count: int) -> dict[str, float]:
    key = ec.derive_private_key(0xC9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721, ec.SECP256R1())
    peer = ec.generate_private_key(ec.SECP256R1()).public_key()
    digest = hashlib.sha256(b"sample").digest()
    sig = key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
    ops = {
        "sign": lambda: key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256()), deterministic_signing=True)),
        "verify": lambda: key.public_key().verify(sig, digest, ec.ECDSA(utils.Prehashed(hashes.SHA256()))),
        "ecdh": lambda: key.exchange(ec.ECDH(), peer),
        "keygen": lambda: ec.derive_private_key(0x1234567 * 7919, ec.SECP256R1()).public_key().public_numbers(),
    }
    out = {}
    for name, op in ops.items():
        start = time.process_time()
        for _ in range(count):
            op()
        out[name] = (time.process_time() - start) / count
    return out


@pytest.mark.slow
def test_measure_against_openssl(ecc_exe: Path, capsys) -> None:
    ec = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")
    ser = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    hashes = pytest.importorskip("cryptography.hazmat.primitives.hashes")
    utils = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.utils")
    count = 50
    key = ec.generate_private_key(ec.SECP256R1())
    d = key.private_numbers().private_value.to_bytes(32, "big")
    q = key.public_key().public_bytes(ser.Encoding.X962, ser.PublicFormat.UncompressedPoint)
    digest = hashlib.sha256(b"sample").digest()
    der = key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
    r, s = utils.decode_dss_signature(der)
    records = {"sign": (4, 256, digest, d, b""), "verify": (2, 256, digest, q, r.to_bytes(32, "big") + s.to_bytes(32, "big")),
               "ecdh": (1, 256, d, q), "keygen": (0, 256, d)}
    ours = {}
    for name, record in records.items():
        # CPU time of the child: one run of `count` records, less one run of a single record.
        times = []
        for n in (1, count + 1):
            res = run_executable(ecc_exe, [str(ecc_exe)], _record(*record) * n, StdoutTarget.pipe(),
                                 RunLimits(timeout=300, max_output=None))
            assert res.exit_status == 0 and res.stdout[0] == 128, res.describe()
            times.append(res.user_seconds + res.sys_seconds)
        ours[name] = (times[1] - times[0]) / count
    theirs = _openssl_seconds(ec, hashes, utils, count)
    with capsys.disabled():
        for name in records:
            print(f"\nP-256 {name}: cancho {ours[name] * 1e6:.0f} us, OpenSSL {theirs[name] * 1e6:.0f} us, "
                  f"ratio {ours[name] / theirs[name]:.1f}")
    assert all(v > 0 for v in ours.values())
