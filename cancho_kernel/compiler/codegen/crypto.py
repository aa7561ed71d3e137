"""Lowering the block-cipher builtins of edition 7: `hw_aes_gcm`, `aes_encrypt_block`,
`ghash_update`, and the reference's multi-block `aes_ctr32`, `ghash_powers`, `gcm_tag` and
`gcm_tag_diff` (its `docs/gcm-wide.md`). Where the CPU has AES and carry-less multiply
(``crypto_hw.py``, x86-64) `hw_aes_gcm()` is true and every one of them runs on those
instructions. Elsewhere `aes_encrypt_block` and `ghash_update` still give FIPS-197's and GCM's
bytes, in portable software that takes the same time whatever the data (no table indexed by a
secret: the S-box is an inversion in GF(2^8) by masked multiplications; no branch on one), and
the four multi-block builtins trap, as the reference's do without the instructions: a program
asks `hw_aes_gcm()` first, as `std.gcm` does. Wrong lengths (or `rounds` not 10, 12 or 14) trap,
as an index out of bounds does.

The work is in three internal functions, defined once per module on first use.
"""

from __future__ import annotations

from llvmlite import ir

from ..check.builtins import LOWERINGS
from ..trapsites import TrapKind
from . import crypto_hw
from .layout import I1, I8, I64, PTR

I128 = ir.IntType(128)
VOID = ir.VoidType()
GCM_R = 0xE1 << 120


def _gf_mul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x * y in GF(2^8) with AES's polynomial, eight masked steps and no branch."""
    p = ir.Constant(I8, 0)
    for _ in range(8):
        low = b.sub(ir.Constant(I8, 0), b.and_(y, ir.Constant(I8, 1)))
        p = b.xor(p, b.and_(x, low))
        high = b.sub(ir.Constant(I8, 0), b.lshr(x, ir.Constant(I8, 7)))
        x = b.xor(b.shl(x, ir.Constant(I8, 1)), b.and_(high, ir.Constant(I8, 0x1B)))
        y = b.lshr(y, ir.Constant(I8, 1))
    return p


def _rotl(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    return b.or_(b.shl(x, ir.Constant(I8, n)), b.lshr(x, ir.Constant(I8, 8 - n)))


def _sbox_function(module: ir.Module) -> ir.Function:
    """`cancho_aes_sbox(x)`: x^254 (the inverse, 0 for 0) then the affine map."""
    f = module.globals.get("cancho_aes_sbox")
    if f is not None:
        return f
    f = ir.Function(module, ir.FunctionType(I8, [I8]), name="cancho_aes_sbox")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    x = f.args[0]
    acc = x
    # x^254 = x^(2+4+8+...+128): square, multiply by x, six times; then one last square.
    for _ in range(6):
        acc = _gf_mul(b, _gf_mul(b, acc, acc), x)
    inv = _gf_mul(b, acc, acc)
    s = inv
    for n in (1, 2, 3, 4):
        s = b.xor(s, _rotl(b, inv, n))
    b.ret(b.xor(s, ir.Constant(I8, 0x63)))
    return f


def _xtime(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    high = b.sub(ir.Constant(I8, 0), b.lshr(a, ir.Constant(I8, 7)))
    return b.xor(b.shl(a, ir.Constant(I8, 1)), b.and_(high, ir.Constant(I8, 0x1B)))


def _encrypt_function(module: ir.Module) -> ir.Function:
    """`cancho_aes_encrypt(keys, rounds, in, out)`: FIPS-197's cipher on one 16-byte block."""
    f = module.globals.get("cancho_aes_encrypt")
    if f is not None:
        return f
    sbox = _sbox_function(module)
    f = ir.Function(module, ir.FunctionType(VOID, [PTR, I64, PTR, PTR]), name="cancho_aes_encrypt")
    f.linkage = "internal"
    keys, rounds, src, dst = f.args
    entry = f.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    state = b.alloca(ir.ArrayType(I8, 16), name="state")
    r_cell = b.alloca(I64, name="round")

    def at(base, i):
        return b.gep(base, [i if isinstance(i, ir.Value) else ir.Constant(I64, i)], source_etype=I8)

    def add_round_key(k: ir.Value) -> None:
        offset = b.mul(k, ir.Constant(I64, 16))
        for i in range(16):
            key = b.load(at(keys, b.add(offset, ir.Constant(I64, i))), typ=I8)
            cell = b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, i)])
            b.store(b.xor(b.load(cell, typ=I8), key), cell)

    for i in range(16):
        b.store(b.load(at(src, i), typ=I8), b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, i)]))
    add_round_key(ir.Constant(I64, 0))
    b.store(ir.Constant(I64, 1), r_cell)
    head = f.append_basic_block("round")
    body = f.append_basic_block("round.body")
    mix = f.append_basic_block("round.mix")
    key = f.append_basic_block("round.key")
    done = f.append_basic_block("done")
    b.branch(head)
    b.position_at_end(head)
    r = b.load(r_cell, typ=I64)
    b.cbranch(b.icmp_signed("<=", r, rounds), body, done)
    b.position_at_end(body)
    old = [b.load(b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, i)]), typ=I8) for i in range(16)]
    sub = [b.call(sbox, [v]) for v in old]
    # ShiftRows: row r of column c takes row r of column c + r.
    shifted = [sub[row + 4 * ((col + row) % 4)] for col in range(4) for row in range(4)]
    for i, v in enumerate(shifted):
        b.store(v, b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, i)]))
    b.cbranch(b.icmp_signed("<", r, rounds), mix, key)
    b.position_at_end(mix)
    for col in range(4):
        a = shifted[4 * col:4 * col + 4]
        d = [_xtime(b, v) for v in a]  # 2 * a
        out = [b.xor(b.xor(d[0], b.xor(d[1], a[1])), b.xor(a[2], a[3])),
               b.xor(b.xor(a[0], d[1]), b.xor(b.xor(d[2], a[2]), a[3])),
               b.xor(b.xor(a[0], a[1]), b.xor(d[2], b.xor(d[3], a[3]))),
               b.xor(b.xor(d[0], a[0]), b.xor(a[1], b.xor(a[2], d[3])))]
        for row, v in enumerate(out):
            b.store(v, b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, 4 * col + row)]))
    b.branch(key)
    b.position_at_end(key)
    add_round_key(r)
    b.store(b.add(r, ir.Constant(I64, 1)), r_cell)
    b.branch(head)
    b.position_at_end(done)
    for i in range(16):
        b.store(b.load(b.gep(state, [ir.Constant(I64, 0), ir.Constant(I64, i)]), typ=I8), at(dst, i))
    b.ret_void()
    return f


def _bswap(module: ir.Module, b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    f = module.globals.get("llvm.bswap.i128")
    if f is None:
        f = ir.Function(module, ir.FunctionType(I128, [I128]), name="llvm.bswap.i128")
    return b.call(f, [v])


def _ghash_function(module: ir.Module) -> ir.Function:
    """`cancho_ghash(h, y, data, n)`: y = (y ^ block) * h for each 16-byte block, in GCM's bit
    order (a block read big-endian, bit 0 the most significant), 128 masked steps a block."""
    f = module.globals.get("cancho_ghash")
    if f is not None:
        return f
    f = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64]), name="cancho_ghash")
    f.linkage = "internal"
    hp, yp, data, n = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    h = _bswap(module, b, b.load(hp, typ=I128, align=1))
    y_cell = b.alloca(I128, name="y")
    off_cell = b.alloca(I64, name="offset")
    z_cell = b.alloca(I128, name="z")
    v_cell = b.alloca(I128, name="v")
    x_cell = b.alloca(I128, name="x")
    i_cell = b.alloca(I64, name="bit")
    b.store(_bswap(module, b, b.load(yp, typ=I128, align=1)), y_cell)
    b.store(ir.Constant(I64, 0), off_cell)
    blocks = f.append_basic_block("blocks")
    block = f.append_basic_block("block")
    bits = f.append_basic_block("bits")
    bit = f.append_basic_block("bit")
    next_block = f.append_basic_block("block.next")
    done = f.append_basic_block("done")
    b.branch(blocks)
    b.position_at_end(blocks)
    off = b.load(off_cell, typ=I64)
    b.cbranch(b.icmp_signed("<", off, n), block, done)
    b.position_at_end(block)
    chunk = _bswap(module, b, b.load(b.gep(data, [off], source_etype=I8), typ=I128, align=1))
    b.store(b.xor(b.load(y_cell, typ=I128), chunk), x_cell)
    b.store(ir.Constant(I128, 0), z_cell)
    b.store(h, v_cell)
    b.store(ir.Constant(I64, 0), i_cell)
    b.branch(bits)
    b.position_at_end(bits)
    i = b.load(i_cell, typ=I64)
    b.cbranch(b.icmp_signed("<", i, ir.Constant(I64, 128)), bit, next_block)
    b.position_at_end(bit)
    x = b.load(x_cell, typ=I128)
    v = b.load(v_cell, typ=I128)
    take = b.sub(ir.Constant(I128, 0), b.lshr(x, ir.Constant(I128, 127)))
    b.store(b.xor(b.load(z_cell, typ=I128), b.and_(v, take)), z_cell)
    carry = b.sub(ir.Constant(I128, 0), b.and_(v, ir.Constant(I128, 1)))
    b.store(b.xor(b.lshr(v, ir.Constant(I128, 1)), b.and_(carry, ir.Constant(I128, GCM_R))), v_cell)
    b.store(b.shl(x, ir.Constant(I128, 1)), x_cell)
    b.store(b.add(i, ir.Constant(I64, 1)), i_cell)
    b.branch(bits)
    b.position_at_end(next_block)
    b.store(b.load(z_cell, typ=I128), y_cell)
    b.store(b.add(off, ir.Constant(I64, 16)), off_cell)
    b.branch(blocks)
    b.position_at_end(done)
    b.store(_bswap(module, b, b.load(y_cell, typ=I128)), yp, align=1)
    b.ret_void()
    return f


def _hardware(self) -> bool:
    """Whether this module builds the CPU path (``crypto_hw.py``): the host, on x86-64."""
    return not self.rt.target.is_wasi and crypto_hw.supported_here()


def _has_hardware(self) -> ir.Value:
    """At run time: whether the CPU has the instructions (false where none is built)."""
    if not _hardware(self):
        return ir.Constant(I1, 0)
    return crypto_hw.probe(self.rt.module, self.b)


@LOWERINGS.register("hw_aes_gcm")
def bi_hw_aes_gcm(self, e, args):
    """Whether the CPU has AES, carry-less multiply and SSSE3 (x86-64: CPUID, asked once)."""
    return _has_hardware(self)


def _trap_unless_len(self, s: ir.Value, want) -> None:
    want = want if isinstance(want, ir.Value) else ir.Constant(I64, want)
    self.gen.trap_if(self.b.icmp_signed("!=", self.b.extract_value(s, 1), want), TrapKind.CHECK)


def _trap_unless_key(self, keys: ir.Value, rounds: ir.Value) -> None:
    """`rounds` 10, 12 or 14 and the key `16 * (rounds + 1)` bytes, else a trap."""
    b = self.b
    known = b.or_(b.or_(b.icmp_signed("==", rounds, ir.Constant(I64, 10)),
                        b.icmp_signed("==", rounds, ir.Constant(I64, 12))),
                  b.icmp_signed("==", rounds, ir.Constant(I64, 14)))
    self.gen.trap_if(b.xor(known, ir.Constant(I1, 1)), TrapKind.CHECK)
    _trap_unless_len(self, keys, b.mul(b.add(rounds, ir.Constant(I64, 1)), ir.Constant(I64, 16)))


def _trap_unless_hardware(self) -> None:
    """The builtins that exist only as the CPU's instructions trap where it lacks them, as the
    reference's call site does on a target without them (`hw_aes_gcm()` says which)."""
    self.gen.trap_if(self.b.xor(_has_hardware(self), ir.Constant(I1, 1)), TrapKind.CHECK)


def _either(self, hardware: ir.Function, software: ir.Function, operands: list) -> None:
    """Call the CPU's version when it has the instructions, else the software one."""
    if not _hardware(self):
        self.b.call(software, operands)
        return
    with self.b.if_else(crypto_hw.probe(self.rt.module, self.b)) as (hw, sw):
        with hw:
            self.b.call(hardware, operands)
        with sw:
            self.b.call(software, operands)


def _ptr(self, s: ir.Value) -> ir.Value:
    return self.b.extract_value(s, 0)


@LOWERINGS.register("aes_encrypt_block")
def bi_aes_encrypt_block(self, e, args):
    """Traps unless `rounds` is 10, 12 or 14, the key is 16 * (rounds + 1) bytes and the block
    and `out` are 16; then encrypts (AES-NI where the CPU has it). Answers 0."""
    keys, rounds, block, out = args
    _trap_unless_key(self, keys, rounds)
    _trap_unless_len(self, block, 16)
    _trap_unless_len(self, out, 16)
    software = _encrypt_function(self.rt.module)
    hardware = crypto_hw.encrypt_block(self.rt.module) if _hardware(self) else software
    _either(self, hardware, software, [_ptr(self, keys), rounds, _ptr(self, block), _ptr(self, out)])
    return ir.Constant(I64, 0)


@LOWERINGS.register("ghash_update")
def bi_ghash_update(self, e, args):
    """Traps unless `h` and `y` are 16 bytes and `data` whole blocks; then folds every block
    of `data` into `y` (carry-less multiply where the CPU has it). Answers 0."""
    b = self.b
    h, y, data = args
    _trap_unless_len(self, h, 16)
    _trap_unless_len(self, y, 16)
    n = b.extract_value(data, 1)
    self.gen.trap_if(b.icmp_signed("!=", b.and_(n, ir.Constant(I64, 15)), ir.Constant(I64, 0)), TrapKind.CHECK)
    software = _ghash_function(self.rt.module)
    hardware = crypto_hw.ghash_blocks(self.rt.module) if _hardware(self) else software
    _either(self, hardware, software, [_ptr(self, h), _ptr(self, y), _ptr(self, data), n])
    return ir.Constant(I64, 0)


@LOWERINGS.register("aes_ctr32")
def bi_aes_ctr32(self, e, args):
    """Counter mode (the reference's `docs/gcm-wide.md` 3.1): traps on a bad key or round
    count, a nonce not 12 bytes, a counter outside 0..2^32, or `input` and `out` of different
    lengths, and where the CPU lacks the instructions. Answers 0."""
    b = self.b
    keys, rounds, nonce, counter, data, out = args
    _trap_unless_key(self, keys, rounds)
    _trap_unless_len(self, nonce, 12)
    self.gen.trap_if(b.icmp_unsigned(">=", counter, ir.Constant(I64, 1 << 32)), TrapKind.CHECK)
    n = b.extract_value(data, 1)
    _trap_unless_len(self, out, n)
    _trap_unless_hardware(self)
    f = crypto_hw.ctr32(self.rt.module)
    b.call(f, [_ptr(self, keys), rounds, _ptr(self, nonce), counter, _ptr(self, data), _ptr(self, out), n])
    return ir.Constant(I64, 0)


@LOWERINGS.register("ghash_powers")
def bi_ghash_powers(self, e, args):
    """H^1 .. H^8 for `gcm_tag` (16-byte `h`, 128-byte `table`), where the CPU has the
    instructions; a trap otherwise. Answers 0."""
    h, table = args
    _trap_unless_len(self, h, 16)
    _trap_unless_len(self, table, 128)
    _trap_unless_hardware(self)
    self.b.call(crypto_hw.powers(self.rt.module), [_ptr(self, h), _ptr(self, table)])
    return ir.Constant(I64, 0)


def _tag(self, args) -> ir.Value:
    """The checks `gcm_tag` and `gcm_tag_diff` share, then the tag as a block."""
    b = self.b
    keys, rounds, table, nonce, aad, text, last = args
    _trap_unless_key(self, keys, rounds)
    _trap_unless_len(self, table, 128)
    _trap_unless_len(self, nonce, 12)
    _trap_unless_len(self, last, 16)
    _trap_unless_hardware(self)
    f = crypto_hw.tag_value(self.rt.module)
    return b.call(f, [_ptr(self, keys), rounds, _ptr(self, table), _ptr(self, nonce), _ptr(self, aad),
                      b.extract_value(aad, 1), _ptr(self, text), b.extract_value(text, 1)])


@LOWERINGS.register("gcm_tag")
def bi_gcm_tag(self, e, args):
    """The 16-byte GCM tag of `text` and `aad` under `nonce`, into `tag`. Answers 0."""
    self.b.store(_tag(self, args), _ptr(self, args[-1]), align=1)
    return ir.Constant(I64, 0)


@LOWERINGS.register("gcm_tag_diff")
def bi_gcm_tag_diff(self, e, args):
    """0 when the tag equals `expected`, else non-zero: the two halves of their XOR ORed, so
    every byte counts and nothing exits early."""
    b = self.b
    tag = _tag(self, args)
    diff = b.xor(tag, b.load(_ptr(self, args[-1]), typ=crypto_hw.V, align=1))
    return b.or_(b.extract_element(diff, ir.Constant(crypto_hw.I32, 0)),
                 b.extract_element(diff, ir.Constant(crypto_hw.I32, 1)))
