"""The runtime's calls into C when a program declares the same symbol with another type.

A user `extern fn close(...) -> int` (an i64 result) next to the runtime's own `close` (a C
`int`): both calls name the one symbol, each with its own function type (pointers are opaque,
so no cast and no private llvmlite API is needed), and the module verifies.
"""

from __future__ import annotations

from llvmlite import ir

from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.codegen.runtime import LIBC, Runtime

I64 = ir.IntType(64)


def test_call_c_through_a_symbol_declared_with_another_type():
    module = ir.Module(name="t")
    module.triple = native.host_triple()
    rt = Runtime(module)
    user_type = ir.FunctionType(I64, [I64])  # the program's `extern fn close(..., fd: int) -> int`
    assert user_type != LIBC["close"]
    user = ir.Function(module, user_type, name="close")
    f = ir.Function(module, ir.FunctionType(I64, [I64]), name="f")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    mine = rt.call_c(b, "close", user_type, [f.args[0]])
    runtime = rt.call_c(b, "close", LIBC["close"], [f.args[0]])
    assert mine.type == I64 and runtime.type == LIBC["close"].return_type
    b.ret(b.add(mine, b.sext(runtime, I64)))
    text = str(module)
    assert text.count('declare i64 @"close"(i64') == 1  # one declaration, the program's
    assert f'call {LIBC["close"].return_type} @"close"(i64' in text
    assert module.globals["close"] is user
    native.parse(text)  # parses and verifies
