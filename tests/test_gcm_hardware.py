"""AES-GCM on the CPU's instructions (codegen/crypto_hw.py, the reference's docs/gcm-wide.md):
`hw_aes_gcm()` answers what the CPU has; std.gcm's hardware path (`aes_ctr32`, `ghash_powers`,
`gcm_tag`, `gcm_tag_diff`) seals every length 0..300, with associated data of every length
class, exactly as OpenSSL does, on both backends; counter mode wraps as SP 800-38D's inc32; a
wrong length or round count traps; the instructions are confined to the builtins' own functions,
so the rest of a program keeps the CPU level it was built for."""

from __future__ import annotations

import platform
import random
import re
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.source import SourceFile
from test_undefined_behaviour import TRAP, both, jit_worker  # noqa: F401  (fixtures)

aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "std" / "gcm_driver.cho"


def cpu_has_aes() -> bool:
    """What the hardware path needs, as the kernel reports the CPU's flags."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False  # the hardware path is built for x86-64 only (codegen/crypto_hw.py)
    flags = next((line.split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    return {"aes", "pclmulqdq", "ssse3"} <= set(flags)


HW = cpu_has_aes()
needs_hw = pytest.mark.skipif(not HW, reason="this CPU has no AES-NI/PCLMULQDQ: the software path is "
                              "tested by tests/test_std.py and tests/test_crypto_builtins.py")


def compiled(text: str) -> str:
    result = api.compile_sources([SourceFile("hw.cho", text)])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    return result.ir


def records(cases) -> bytes:
    return b"".join(bytes([len(k)]) + k + n + len(a).to_bytes(3, "little") + a
                    + len(p).to_bytes(3, "little") + p for k, n, a, p in cases)


def test_hw_aes_gcm_answers_what_the_cpu_has(both):
    ir = compiled("""edition 7;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args); release(net);
    release(clock); release(signals); release(exec);
    if hw_aes_gcm() { return 7; }
    return 3;
}
""")
    assert both.run(ir).status == (7 if HW else 3)


def test_every_length_seals_as_openssl_on_both_backends(both):
    """301 text lengths (every one from 0 to 300: whole groups of eight blocks, ragged tails)
    with associated data of every length class, AES-128 and AES-256; `open` round-trips and
    refuses a flipped tag bit (the driver's last byte per record)."""
    rnd = random.Random(382)
    aad_lengths = [0, 1, 13, 15, 16, 17, 127, 128, 129, 200]
    cases = [(rnd.randbytes(rnd.choice([16, 32])), rnd.randbytes(12),
              rnd.randbytes(aad_lengths[n % len(aad_lengths)]), rnd.randbytes(n)) for n in range(301)]
    seen = both.run(compiled(DRIVER.read_text()), records(cases))
    assert seen.status == 0, seen
    out, at = seen.stdout, 0
    for key, nonce, aad, pt in cases:
        want = aead.AESGCM(key).encrypt(nonce, pt, aad)
        assert out[at:at + len(want)] == want, (len(key), len(aad), len(pt))
        assert out[at + len(want)] == 0, "open did not round-trip or accepted a bad tag"
        at += len(want) + 1
    assert at == len(out)


CTR = """edition 7;
import std.aes;

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args, net, clock, signals, exec }} = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(clock);
    release(signals); release(exec);
    var out = io;
    region r {{
        let key = alloc_slice[r](16, byte_of(0));
        let nonce = alloc_slice[r](12, byte_of(0));
        var i = 0;
        while i < 16 {{ key[i] = byte_of(i * 7 + 1); i = i + 1; }}
        i = 0;
        while i < 12 {{ nonce[i] = byte_of(200 - i); i = i + 1; }}
        let rk = alloc_slice[r](176, byte_of(0));
        aes.round_keys(key, rk);
        let input = alloc_slice[r]({n}, byte_of(0));
        i = 0;
        while i < {n} {{ input[i] = byte_of(i % 251); i = i + 1; }}
        let o = alloc_slice[r]({out}, byte_of(0));
        aes_ctr32(rk[0..{keys}], {rounds}, nonce[0..{nonce}], {counter}, input, o);
        borrow mut out as &!w in {{
            write_bytes(w, o);
        }}
    }}
    release(out);
    return 0;
}}
"""


def ctr_reference(counter: int, n: int) -> bytes:
    """AES-128 counter mode with a 32-bit big-endian counter that wraps (SP 800-38D inc32)."""
    key = bytes((i * 7 + 1) % 256 for i in range(16))
    nonce = bytes(200 - i for i in range(12))
    ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    blocks = (n + 15) // 16
    stream = ecb.update(b"".join(nonce + ((counter + j) % 2**32).to_bytes(4, "big") for j in range(blocks)))
    return bytes(b ^ (i % 251) for i, b in zip(range(n), stream))


@needs_hw
@pytest.mark.parametrize("counter, n", [(2, 0), (2, 1), (2, 127), (2, 128), (2, 129), (0xfffffffe, 300),
                                        (0xffffffff, 40), (0, 1000)])
def test_ctr32_is_counter_mode_and_wraps(both, counter, n):
    ir = compiled(CTR.format(n=n, out=n, keys=176, rounds=10, nonce=12, counter=counter))
    seen = both.run(ir)
    assert seen.status == 0 and seen.stdout == ctr_reference(counter, n)


@needs_hw
@pytest.mark.parametrize("case", ["counter", "nonce", "out", "rounds", "keys"])
def test_ctr32_wrong_arguments_trap(both, case):
    args = dict(n=32, out=32, keys=176, rounds=10, nonce=12, counter=2)
    args.update({"counter": dict(counter=1 << 32), "nonce": dict(nonce=11), "out": dict(out=31),
                 "rounds": dict(rounds=12), "keys": dict(keys=160)}[case])
    assert both.run(compiled(CTR.format(**args))).status == TRAP


def test_multi_block_builtins_are_refused_for_webassembly():
    """On WebAssembly none of them is built: a program using them is refused for the target
    before any code is made, as the other builtins WASI lacks (target.py)."""
    from cancho_kernel.compiler.target import WASM32_WASIP1 as WASI, refusal_for

    for name in ("aes_ctr32", "ghash_powers", "gcm_tag", "gcm_tag_diff"):
        assert refusal_for(name, WASI) is not None


@needs_hw
@pytest.mark.parametrize("cpu", ["host", "baseline"])
def test_instructions_stay_in_the_builtins_functions(cpu, monkeypatch):
    """AES-NI and PCLMULQDQ appear in the assembly, under the baseline CPU too (the features
    are on the builtins' own functions), and only inside those functions: `main`, compiled for
    the CPU level asked for, has neither."""
    monkeypatch.setenv("CANCHO_CPU", cpu)
    asm = native.emit_asm(compiled(DRIVER.read_text()))
    assert "aesenc" in asm and "pclmulqdq" in asm
    functions = re.split(r"\n(?=[A-Za-z_][\w$]*:\n)", asm)
    holders = {f.split(":", 1)[0] for f in functions if "aesenc" in f or "pclmulqdq" in f}
    assert holders and all(name.startswith("cancho_hw_") for name in holders), holders
