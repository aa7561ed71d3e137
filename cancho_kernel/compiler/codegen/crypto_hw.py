"""The CPU's AES and carry-less multiply for the edition-7 cipher builtins (x86-64: AES-NI and
PCLMULQDQ), as the reference's `docs/crypto-builtins.md` and `docs/gcm-wide.md` design them.

Every function here is internal to the module that calls a builtin and carries the instructions'
target features on its own definition, never the module's, so the rest of a program stays at the
CPU level it was built for (``compiler/cpu.py``) and a CPU without the instructions never meets
one unless a program ignores `hw_aes_gcm()`, which the builtins check again (a trap, as the
reference's call site is on a target without them).

Blocks are `<2 x i64>` values. GHASH works on blocks read byte-reversed (GCM's *reflected*
order: bit 127 - i of the 128-bit integer is the coefficient of x^i), where a carry-less product
shifted left by one bit has the product's low 128 coefficients in its upper half, and folding
the lower half back is a multiply by x^7 + x^2 + x + 1, i.e. right shifts by 0, 1, 2 and 7. Eight
blocks share one reduction. Every loop bound and branch is on a length, never on a key, a block
or a tag (constant time, as the reference promises for these builtins).
"""

from __future__ import annotations

import platform
from typing import Callable

from llvmlite import ir

I1, I8, I32, I64, I96, I128 = (ir.IntType(n) for n in (1, 8, 32, 64, 96, 128))
I256 = ir.IntType(256)
V = ir.VectorType(I64, 2)
B16 = ir.VectorType(I8, 16)
PTR = ir.PointerType()
VOID = ir.VoidType()
FEATURES = '"target-features"="+aes,+pclmul,+ssse3,+sse2"'
GROUP = 8  # blocks per aggregated GHASH reduction and per interleaved AES pass


def supported_here() -> bool:
    """Whether the hardware path is built for the host target: x86-64 only, for now (the
    reference also has aarch64's AESE and PMULL; here that CPU takes the software path)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _define(module: ir.Module, name: str, ret: ir.Type, params: list[ir.Type],
            body: Callable[[ir.Function, ir.IRBuilder], None], inline: bool = False) -> ir.Function:
    """An internal function carrying the instructions' features, defined once per module."""
    f = module.globals.get(name)
    if f is not None:
        return f
    f = ir.Function(module, ir.FunctionType(ret, params), name=name)
    f.linkage = "internal"
    # llvmlite's attribute set knows no string attributes: add the features as written.
    set.add(f.attributes, FEATURES)
    f.attributes.add("alwaysinline" if inline else "noinline")
    body(f, ir.IRBuilder(f.append_basic_block("entry")))
    return f


def _intrinsic(module: ir.Module, name: str, ret: ir.Type, params: list[ir.Type]) -> ir.Function:
    f = module.globals.get(name)
    return f if f is not None else ir.Function(module, ir.FunctionType(ret, params), name=name)


def _c64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


# ------------------------------------------------------------------ does the CPU have them


def probe(module: ir.Module, b: ir.IRBuilder) -> ir.Value:
    """True when the CPU has AES-NI, PCLMULQDQ and SSSE3 (CPUID leaf 1, ECX bits 25, 1, 9). The
    answer is kept in a module global (0 not asked, 1 no, 2 yes), read and written atomically,
    because CPUID is slow under a hypervisor and the answer never changes."""
    return b.call(_probe_function(module), [])


def _probe_function(module: ir.Module) -> ir.Function:
    cell = module.globals.get("cancho_hw_aes_answer")
    if cell is None:
        cell = ir.GlobalVariable(module, I8, name="cancho_hw_aes_answer")
        cell.linkage = "internal"
        cell.initializer = ir.Constant(I8, 0)
    f = module.globals.get("cancho_hw_aes_probe")
    if f is not None:
        return f
    f = ir.Function(module, ir.FunctionType(I1, []), name="cancho_hw_aes_probe")
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    known = b.load_atomic(cell, "monotonic", 1)
    ask, done = f.append_basic_block("ask"), f.append_basic_block("done")
    b.cbranch(b.icmp_unsigned("==", known, ir.Constant(I8, 0)), ask, done)
    entry = b.block
    b.position_at_end(ask)
    regs = ir.LiteralStructType([I32, I32, I32, I32])
    cpuid = ir.InlineAsm(ir.FunctionType(regs, [I32, I32]), "cpuid",
                         "={ax},={bx},={cx},={dx},0,2", side_effect=False)
    ecx = b.extract_value(b.call(cpuid, [ir.Constant(I32, 1), ir.Constant(I32, 0)]), 2)
    need = ir.Constant(I32, (1 << 25) | (1 << 1) | (1 << 9))
    has = b.icmp_unsigned("==", b.and_(ecx, need), need)
    answer = b.select(has, ir.Constant(I8, 2), ir.Constant(I8, 1))
    b.store_atomic(answer, cell, "monotonic", 1)
    b.branch(done)
    b.position_at_end(done)
    phi = b.phi(I8)
    phi.add_incoming(known, entry)
    phi.add_incoming(answer, ask)
    b.ret(b.icmp_unsigned("==", phi, ir.Constant(I8, 2)))
    return f


# ------------------------------------------------------------------ AES


def _aes_rounds(module: ir.Module, b: ir.IRBuilder, f: ir.Function, rk: ir.Value, rounds: ir.Value,
                blocks: list[ir.Value]) -> list[ir.Value]:
    """FIPS-197's cipher on every block at once (their rounds interleaved, so the AES unit's
    latency is hidden): AddRoundKey, ``rounds - 1`` AESENC, one AESENCLAST."""
    enc = _intrinsic(module, "llvm.x86.aesni.aesenc", V, [V, V])
    last = _intrinsic(module, "llvm.x86.aesni.aesenclast", V, [V, V])

    def key(r: ir.Value) -> ir.Value:
        return b.load(b.gep(rk, [b.mul(r, _c64(16))], source_etype=I8), typ=V, align=1)

    k0 = key(_c64(0))
    start = [b.xor(x, k0) for x in blocks]
    pre = b.block
    loop, out = f.append_basic_block("aes.round"), f.append_basic_block("aes.last")
    b.branch(loop)
    b.position_at_end(loop)
    r = b.phi(I64)
    states = [b.phi(V) for _ in blocks]
    kr = key(r)
    nxt = [b.call(enc, [s, kr]) for s in states]
    r1 = b.add(r, _c64(1))
    r.add_incoming(_c64(1), pre)
    r.add_incoming(r1, loop)
    for s, x0, x1 in zip(states, start, nxt):
        s.add_incoming(x0, pre)
        s.add_incoming(x1, loop)
    b.cbranch(b.icmp_signed("<", r1, rounds), loop, out)
    b.position_at_end(out)
    kl = key(rounds)
    return [b.call(last, [x, kl]) for x in nxt]


def encrypt_block(module: ir.Module) -> ir.Function:
    """`cancho_hw_aes_block(round_keys, rounds, in, out)`: one block."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        rk, rounds, src, dst = f.args
        (y,) = _aes_rounds(module, b, f, rk, rounds, [b.load(src, typ=V, align=1)])
        b.store(y, dst, align=1)
        b.ret_void()
    return _define(module, "cancho_hw_aes_block", VOID, [PTR, I64, PTR, PTR], body)


def _counter_block(b: ir.IRBuilder, nonce_bits: ir.Value, counter: ir.Value) -> ir.Value:
    """nonce || be32(counter mod 2^32), as a block."""
    ctr = b.trunc(counter, I32)
    bswap = _intrinsic(b.module, "llvm.bswap.i32", I32, [I32])
    high = b.shl(b.zext(b.call(bswap, [ctr]), I128), ir.Constant(I128, 96))
    return b.bitcast(b.or_(nonce_bits, high), V)


def ctr32(module: ir.Module) -> ir.Function:
    """`cancho_hw_ctr32(round_keys, rounds, nonce, counter, in, out, len)`: counter mode,
    `out[i] = in[i] ^ E(nonce || be32(counter + i / 16))[i % 16]`, eight blocks a pass; the
    last partial pass's keystream goes through a stack buffer that is overwritten after."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        rk, rounds, nonce, counter, src, dst, n = f.args
        buf = b.alloca(V, GROUP, name="keystream")
        nonce_bits = b.zext(b.load(nonce, typ=I96, align=1), I128)
        groups = b.udiv(n, _c64(16 * GROUP))
        entry = b.block
        head, body_, tail = (f.append_basic_block(s) for s in ("ctr.group", "ctr.body", "ctr.tail"))
        b.branch(head)
        b.position_at_end(head)
        g = b.phi(I64)
        g.add_incoming(_c64(0), entry)
        b.cbranch(b.icmp_unsigned("<", g, groups), body_, tail)
        b.position_at_end(body_)
        base = b.mul(g, _c64(GROUP))
        blocks = [_counter_block(b, nonce_bits, b.add(counter, b.add(base, _c64(j)))) for j in range(GROUP)]
        keys = _aes_rounds(module, b, f, rk, rounds, blocks)
        at = b.mul(g, _c64(16 * GROUP))
        for j, k in enumerate(keys):
            off = b.add(at, _c64(16 * j))
            x = b.load(b.gep(src, [off], source_etype=I8), typ=V, align=1)
            b.store(b.xor(x, k), b.gep(dst, [off], source_etype=I8), align=1)
        g.add_incoming(b.add(g, _c64(1)), b.block)
        b.branch(head)
        b.position_at_end(tail)
        _ctr_tail(module, b, f, (rk, rounds, nonce_bits, counter, src, dst, n, groups, buf))
        b.ret_void()
    return _define(module, "cancho_hw_ctr32", VOID, [PTR, I64, PTR, I64, PTR, PTR, I64], body)


def _ctr_tail(module: ir.Module, b: ir.IRBuilder, f: ir.Function, parts: tuple) -> None:
    """The last `len mod 128` bytes: one more pass of keystream into ``buf``, XORed byte by
    byte, then ``buf`` overwritten with volatile stores (the keystream is secret)."""
    rk, rounds, nonce_bits, counter, src, dst, n, groups, buf = parts
    start = b.mul(groups, _c64(16 * GROUP))
    rest = b.sub(n, start)
    some, done = f.append_basic_block("ctr.some"), f.append_basic_block("ctr.done")
    b.cbranch(b.icmp_unsigned(">", rest, _c64(0)), some, done)
    b.position_at_end(some)
    base = b.mul(groups, _c64(GROUP))
    blocks = [_counter_block(b, nonce_bits, b.add(counter, b.add(base, _c64(j)))) for j in range(GROUP)]
    for j, k in enumerate(_aes_rounds(module, b, f, rk, rounds, blocks)):
        b.store(k, b.gep(buf, [_c64(16 * j)], source_etype=I8), align=1)
    pre = b.block
    loop, wipe = f.append_basic_block("ctr.byte"), f.append_basic_block("ctr.wipe")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(_c64(0), pre)
    at = b.add(start, i)
    x = b.load(b.gep(src, [at], source_etype=I8), typ=I8)
    k = b.load(b.gep(buf, [i], source_etype=I8), typ=I8)
    b.store(b.xor(x, k), b.gep(dst, [at], source_etype=I8))
    i1 = b.add(i, _c64(1))
    i.add_incoming(i1, loop)
    b.cbranch(b.icmp_unsigned("<", i1, rest), loop, wipe)
    b.position_at_end(wipe)
    for j in range(GROUP):
        st = b.store(ir.Constant(V, [0, 0]), b.gep(buf, [_c64(16 * j)], source_etype=I8), align=1)
        st.volatile = True
    b.branch(done)
    b.position_at_end(done)


# ------------------------------------------------------------------ GHASH


def _reverse(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A block's bytes in reverse order (a GCM block into the reflected form, and back)."""
    mask = ir.Constant(ir.VectorType(I32, 16), list(range(15, -1, -1)))
    raw = b.bitcast(x, B16)
    return b.bitcast(b.shuffle_vector(raw, ir.Constant(B16, None), mask), V)


def _clmul(b: ir.IRBuilder, x: ir.Value, y: ir.Value, imm: int) -> ir.Value:
    pcl = _intrinsic(b.module, "llvm.x86.pclmulqdq", V, [V, V, I8])
    return b.call(pcl, [x, y, ir.Constant(I8, imm)])


def _product(b: ir.IRBuilder, x: ir.Value, h: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The unreduced carry-less product as its low, middle (both cross terms) and high parts."""
    mid = b.xor(_clmul(b, x, h, 0x01), _clmul(b, x, h, 0x10))
    return _clmul(b, x, h, 0x00), mid, _clmul(b, x, h, 0x11)


def _sum(b: ir.IRBuilder, acc: tuple | None, part: tuple) -> tuple:
    return part if acc is None else tuple(b.xor(a, p) for a, p in zip(acc, part))


def _reduce(b: ir.IRBuilder, lo: ir.Value, mid: ir.Value, hi: ir.Value) -> ir.Value:
    """The product modulo GCM's polynomial, in the reflected form: the 256-bit product shifted
    left by one, its lower half folded into the upper twice (the second time for the bits the
    first fold shifted out)."""
    wide = b.xor(b.zext(b.bitcast(lo, I128), I256),
                 b.xor(b.shl(b.zext(b.bitcast(mid, I128), I256), ir.Constant(I256, 64)),
                       b.shl(b.zext(b.bitcast(hi, I128), I256), ir.Constant(I256, 128))))
    wide = b.shl(wide, ir.Constant(I256, 1))
    upper = b.trunc(b.lshr(wide, ir.Constant(I256, 128)), I128)
    lower = b.trunc(wide, I128)

    def fold(x: ir.Value) -> ir.Value:
        out = x
        for k in (1, 2, 7):
            out = b.xor(out, b.lshr(x, ir.Constant(I128, k)))
        return out

    spill = b.xor(b.shl(lower, ir.Constant(I128, 127)),
                  b.xor(b.shl(lower, ir.Constant(I128, 126)), b.shl(lower, ir.Constant(I128, 121))))
    return b.bitcast(b.xor(upper, b.xor(fold(lower), fold(spill))), V)


def _power(b: ir.IRBuilder, table: ir.Value, k: int) -> ir.Value:
    """H^k from the table (entry k - 1, reflected)."""
    return b.load(b.gep(table, [_c64(16 * (k - 1))], source_etype=I8), typ=V, align=1)


def _absorb_group(b: ir.IRBuilder, table: ir.Value, data: ir.Value, y: ir.Value, n: int) -> ir.Value:
    """y after ``n`` whole blocks at ``data``: block j times H^(n - j), one reduction."""
    acc = None
    for j in range(n):
        x = _reverse(b, b.load(b.gep(data, [_c64(16 * j)], source_etype=I8), typ=V, align=1))
        if j == 0:
            x = b.xor(x, y)
        acc = _sum(b, acc, _product(b, x, _power(b, table, n - j)))
    return _reduce(b, *acc)


def absorb(module: ir.Module) -> ir.Function:
    """`cancho_hw_gh_absorb(table, y, data, len)`: y after `len` bytes of data, zero-padded to
    whole blocks: groups of eight, then one block at a time, the ragged last block copied into
    a zeroed stack block first."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        table, y0, data, n = f.args
        pad = b.alloca(V, name="pad")
        groups = b.udiv(n, _c64(16 * GROUP))
        entry = b.block
        head, grp, single = (f.append_basic_block(s) for s in ("gh.group", "gh.body", "gh.single"))
        b.branch(head)
        b.position_at_end(head)
        g, y = b.phi(I64), b.phi(V)
        g.add_incoming(_c64(0), entry)
        y.add_incoming(y0, entry)
        b.cbranch(b.icmp_unsigned("<", g, groups), grp, single)
        b.position_at_end(grp)
        at = b.gep(data, [b.mul(g, _c64(16 * GROUP))], source_etype=I8)
        y8 = _absorb_group(b, table, at, y, GROUP)
        g.add_incoming(b.add(g, _c64(1)), b.block)
        y.add_incoming(y8, b.block)
        b.branch(head)
        b.position_at_end(single)
        b.ret(_absorb_rest(b, f, (table, y, data, n, b.mul(groups, _c64(16 * GROUP)), pad)))
    return _define(module, "cancho_hw_gh_absorb", V, [PTR, V, PTR, I64], body)


def _absorb_rest(b: ir.IRBuilder, f: ir.Function, parts: tuple) -> ir.Value:
    """The blocks after the last whole group, one reduction each."""
    table, y0, data, n, start, pad = parts
    pre = b.block
    head, one, last, done = (f.append_basic_block(s) for s in ("gh.rest", "gh.one", "gh.ragged", "gh.done"))
    b.branch(head)
    b.position_at_end(head)
    at, y = b.phi(I64), b.phi(V)
    at.add_incoming(start, pre)
    y.add_incoming(y0, pre)
    whole = b.icmp_unsigned("<=", b.add(at, _c64(16)), n)
    b.cbranch(whole, one, last)
    b.position_at_end(one)
    y1 = _absorb_group(b, table, b.gep(data, [at], source_etype=I8), y, 1)
    at.add_incoming(b.add(at, _c64(16)), b.block)
    y.add_incoming(y1, b.block)
    b.branch(head)
    b.position_at_end(last)
    rest = b.sub(n, at)
    ragged, finish = f.append_basic_block("gh.copy"), b.block
    b.cbranch(b.icmp_unsigned(">", rest, _c64(0)), ragged, done)
    b.position_at_end(ragged)
    b.store(ir.Constant(V, [0, 0]), pad, align=1)
    memcpy = _intrinsic(b.module, "llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
    b.call(memcpy, [pad, b.gep(data, [at], source_etype=I8), rest, ir.Constant(I1, 0)])
    y2 = _absorb_group(b, table, pad, y, 1)
    copied = b.block
    b.branch(done)
    b.position_at_end(done)
    out = b.phi(V)
    out.add_incoming(y, finish)
    out.add_incoming(y2, copied)
    return out


def powers(module: ir.Module) -> ir.Function:
    """`cancho_hw_gh_powers(h, table)`: H^1 .. H^8, reflected, 16 bytes each, H^1 first."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        hp, table = f.args
        h = _reverse(b, b.load(hp, typ=V, align=1))
        power = h
        for k in range(GROUP):
            if k:
                power = _reduce(b, *_product(b, power, h))
            b.store(power, b.gep(table, [_c64(16 * k)], source_etype=I8), align=1)
        b.ret_void()
    return _define(module, "cancho_hw_gh_powers", VOID, [PTR, PTR], body)


def ghash_blocks(module: ir.Module) -> ir.Function:
    """`cancho_hw_ghash(h, y, data, len)`: `ghash_update`'s step, y = (y ^ block) * H for each
    whole block, one reduction a block (it has H, not its powers)."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        hp, yp, data, n = f.args
        h = _reverse(b, b.load(hp, typ=V, align=1))
        entry = b.block
        head, step, done = (f.append_basic_block(s) for s in ("gh.head", "gh.step", "gh.done"))
        b.branch(head)
        b.position_at_end(head)
        at, y = b.phi(I64), b.phi(V)
        at.add_incoming(_c64(0), entry)
        y.add_incoming(_reverse_in(b, entry, yp), entry)
        b.cbranch(b.icmp_unsigned("<", at, n), step, done)
        b.position_at_end(step)
        x = b.xor(y, _reverse(b, b.load(b.gep(data, [at], source_etype=I8), typ=V, align=1)))
        y1 = _reduce(b, *_product(b, x, h))
        at.add_incoming(b.add(at, _c64(16)), step)
        y.add_incoming(y1, step)
        b.branch(head)
        b.position_at_end(done)
        b.store(_reverse(b, y), yp, align=1)
        b.ret_void()
    return _define(module, "cancho_hw_ghash", VOID, [PTR, PTR, PTR, I64], body)


def _reverse_in(b: ir.IRBuilder, block: ir.Block, yp: ir.Value) -> ir.Value:
    """The state loaded and reflected at the end of ``block`` (before its terminator)."""
    here = b.block
    b.position_before(block.terminator)
    y = _reverse(b, b.load(yp, typ=V, align=1))
    b.position_at_end(here)
    return y


def tag_value(module: ir.Module) -> ir.Function:
    """`cancho_hw_gcm_tag_value(rk, rounds, table, nonce, aad, aad_len, text, text_len)`: the
    16-byte tag, GHASH over the padded aad, the padded text and the lengths block, XORed with
    E(nonce || 1) (issued first, so its latency runs under the hashing)."""
    def body(f: ir.Function, b: ir.IRBuilder) -> None:
        rk, rounds, table, nonce, aad, aad_len, text, text_len = f.args
        nonce_bits = b.zext(b.load(nonce, typ=I96, align=1), I128)
        (mask,) = _aes_rounds(module, b, f, rk, rounds, [_counter_block(b, nonce_bits, _c64(1))])
        gh = absorb(module)
        y = b.call(gh, [table, ir.Constant(V, [0, 0]), aad, aad_len])
        y = b.call(gh, [table, y, text, text_len])
        lengths = b.insert_element(b.insert_element(ir.Constant(V, [0, 0]), b.shl(text_len, _c64(3)),
                                                    ir.Constant(I32, 0)),
                                   b.shl(aad_len, _c64(3)), ir.Constant(I32, 1))
        y = _reduce(b, *_product(b, b.xor(y, lengths), _power(b, table, 1)))
        b.ret(b.xor(_reverse(b, y), mask))
    return _define(module, "cancho_hw_gcm_tag_value", V, [PTR, I64, PTR, PTR, PTR, I64, PTR, I64], body)
