"""The edition-7 block-cipher builtins (codegen/crypto.py) against FIPS-197's and NIST GCM's
published answers and a pure-Python oracle, on both backends: `aes_encrypt_block` is the
standard cipher over an expanded key, `ghash_update` GCM's GHASH step, `hw_aes_gcm()` true
exactly where the CPU has AES-NI and PCLMULQDQ (then both run on them; else in software), and
wrong lengths trap."""

from __future__ import annotations

import random

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.source import SourceFile
from test_gcm_hardware import HW
from test_undefined_behaviour import TRAP, both, jit_worker  # noqa: F401  (fixtures)


def _sbox() -> list[int]:
    def mul(a: int, b: int) -> int:
        p = 0
        for _ in range(8):
            if b & 1:
                p ^= a
            a = ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF
            b >>= 1
        return p

    box = []
    for x in range(256):
        inv = next((y for y in range(1, 256) if mul(x, y) == 1), 0)
        s = inv
        for n in range(1, 5):
            s ^= ((inv << n) | (inv >> (8 - n))) & 0xFF
        box.append(s ^ 0x63)
    return box


SBOX = _sbox()


def expand(key: bytes) -> tuple[bytes, int]:
    """FIPS-197 §5.2's key expansion: (round keys, rounds)."""
    nk = len(key) // 4
    rounds = nk + 6
    words = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (rounds + 1)):
        t = list(words[-1])
        if i % nk == 0:
            t = [SBOX[b] for b in t[1:] + t[:1]]
            t[0] ^= rcon
            rcon = ((rcon << 1) ^ (0x1B if rcon & 0x80 else 0)) & 0xFF
        elif nk > 6 and i % nk == 4:
            t = [SBOX[b] for b in t]
        words.append([a ^ b for a, b in zip(words[i - nk], t)])
    return bytes(b for w in words for b in w), rounds


def ghash(h: bytes, y: bytes, data: bytes) -> bytes:
    """GCM's GHASH step, straight from SP 800-38D's algorithm 1."""
    hh = int.from_bytes(h, "big")
    acc = int.from_bytes(y, "big")
    for k in range(0, len(data), 16):
        x = acc ^ int.from_bytes(data[k:k + 16], "big")
        z, v = 0, hh
        for i in range(128):
            if (x >> (127 - i)) & 1:
                z ^= v
            v = (v >> 1) ^ (0xE1 << 120) if v & 1 else v >> 1
        acc = z
    return acc.to_bytes(16, "big")


def encrypt(keys: bytes, rounds: int, block: bytes) -> bytes:
    """FIPS-197 §5.1's cipher over given round keys, in the plainest Python."""
    def xt(a: int) -> int:
        return ((a << 1) ^ (0x1B if a & 0x80 else 0)) & 0xFF
    s = [b ^ k for b, k in zip(block, keys[:16])]
    for r in range(1, rounds + 1):
        s = [SBOX[b] for b in s]
        s = [s[row + 4 * ((col + row) % 4)] for col in range(4) for row in range(4)]
        if r < rounds:
            m = []
            for c in range(4):
                a = s[4 * c:4 * c + 4]
                m += [xt(a[0]) ^ xt(a[1]) ^ a[1] ^ a[2] ^ a[3], a[0] ^ xt(a[1]) ^ xt(a[2]) ^ a[2] ^ a[3],
                      a[0] ^ a[1] ^ xt(a[2]) ^ xt(a[3]) ^ a[3], xt(a[0]) ^ a[0] ^ a[1] ^ a[2] ^ xt(a[3])]
            s = m
        s = [b ^ k for b, k in zip(s, keys[16 * r:16 * r + 16])]
    return bytes(s)


def fill(name: str, data: bytes) -> str:
    return "\n".join(f"        {name}[{i}] = byte_of({b});" for i, b in enumerate(data))


def program(keys: bytes, rounds: int, block: bytes, h: bytes, y: bytes, data: bytes, out_len: int = 16) -> str:
    return f"""edition 7;

fn hex[&i, &t](io: &!i Io, text: &t [byte]) -> [io_write] int {{
    var k = 0;
    while k < len(text) {{
        let v = int_of(text[k]);
        putchar(io, int_of("0123456789abcdef"[v / 16]));
        putchar(io, int_of("0123456789abcdef"[v % 16]));
        k = k + 1;
    }}
    return putchar(io, 10);
}}

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args, net, clock, signals, exec }} = split(world);
    release(ffi); release(fs); release(heap); release(args); release(net); release(clock);
    release(signals); release(exec);
    var out = io;
    region a {{
        let keys = alloc_slice[a]({len(keys)}, byte_of(0));
        let block = alloc_slice[a]({len(block)}, byte_of(0));
        let result = alloc_slice[a]({out_len}, byte_of(0));
        let h = alloc_slice[a]({len(h)}, byte_of(0));
        let y = alloc_slice[a]({len(y)}, byte_of(0));
        let data = alloc_slice[a]({len(data)}, byte_of(0));
{fill("keys", keys)}
{fill("block", block)}
{fill("h", h)}
{fill("y", y)}
{fill("data", data)}
        borrow mut out as &!o in {{
            if hw_aes_gcm() {{ write_bytes(o, "hw\\n"); }} else {{ write_bytes(o, "sw\\n"); }}
            aes_encrypt_block(keys, {rounds}, block, result);
            hex(o, result);
            ghash_update(h, y, data);
            hex(o, y);
        }}
    }}
    release(out);
    return 0;
}}
"""


def run(both, *a, **k) -> list[str]:
    result = api.compile_sources([SourceFile("aes.cho", program(*a, **k))])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    seen = both.run(result.ir)
    assert seen.status == 0 or seen.status == TRAP, seen
    return seen.stdout.decode().split() if seen.status == 0 else ["trapped"]


PLAIN = bytes.fromhex("00112233445566778899aabbccddeeff")
# NIST GCM test case 2 (key and IV zero, one zero block): H = AES_0(0), the ciphertext, and the
# tag, whose GHASH part is the tag XOR AES_0(J0) (the tag of test case 1).
H0 = bytes.fromhex("66e94bd4ef8a2c3b884cfa59ca342b2e")
C2 = bytes.fromhex("0388dace60b6a392f328c2b971b2fe78")
TAG2 = bytes.fromhex("ab6e47d42cec13bdf53a67b21257bddf")
EJ0 = bytes.fromhex("58e2fccefa7e3061367f1d57a4e7455a")


@pytest.mark.parametrize("key_len, want", [(16, "69c4e0d86a7b0430d8cdb78070b4c55a"),
                                           (24, "dda97ca4864cdfe06eaf70a0ec0d7191"),
                                           (32, "8ea2b7ca516745bfeafc49904b496089")])
def test_fips_197_appendix_c(both, key_len, want):
    keys, rounds = expand(bytes(range(key_len)))
    lengths = (0).to_bytes(8, "big") + (128).to_bytes(8, "big")
    got = run(both, keys, rounds, PLAIN, H0, bytes(16), C2 + lengths)
    assert got == ["hw" if HW else "sw", want, bytes(a ^ b for a, b in zip(TAG2, EJ0)).hex()]


def test_random_keys_blocks_and_messages_match_the_oracle(both):
    rng = random.Random(14)
    for key_len in (16, 24, 32):
        key, block = rng.randbytes(key_len), rng.randbytes(16)
        h, y, data = rng.randbytes(16), rng.randbytes(16), rng.randbytes(16 * rng.randint(0, 5))
        keys, rounds = expand(key)
        got = run(both, keys, rounds, block, h, y, data)
        assert got[1:] == [encrypt(keys, rounds, block).hex(), ghash(h, y, data).hex()]


def test_any_round_keys_match_the_python_cipher(both):
    assert encrypt(*expand(bytes(range(16))), PLAIN).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    rng = random.Random(7)
    keys = rng.randbytes(16 * 15)  # any round keys, not only an expansion's
    block = rng.randbytes(16)
    got = run(both, keys, 14, block, H0, bytes(16), b"")
    assert got[1] == encrypt(keys, 14, block).hex()
    assert got[2] == bytes(16).hex()


@pytest.mark.parametrize("case", ["rounds", "keys", "out", "data"])
def test_wrong_lengths_trap(both, case):
    keys, rounds = expand(bytes(16))
    args = dict(keys=keys, rounds=rounds, block=PLAIN, h=H0, y=bytes(16), data=bytes(32))
    if case == "rounds":
        args["rounds"] = 11
    elif case == "keys":
        args["keys"] = keys[:-1]
    elif case == "data":
        args["data"] = bytes(15)
    out_len = 15 if case == "out" else 16
    assert run(both, **args, out_len=out_len) == ["trapped"]
