"""The run-time support every program gets: libc declarations, the trap, the C entry wrapper.

Kept apart from expression lowering so the contract with C (symbols, widths, streams) is in one
place (runtime.md §0, §1.1, §3.1, §6).
"""

from __future__ import annotations

import platform

from llvmlite import ir

from ..target import HOST, Target
from .wasi import WASI_C, build_adapter
from ..trapsites import trap_asm as site_trap_asm

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

LIBC: dict[str, ir.FunctionType] = {
    "putchar": ir.FunctionType(I32, [I32]),
    "getchar": ir.FunctionType(I32, []),
    "putc": ir.FunctionType(I32, [I32, PTR]),
    "getc": ir.FunctionType(I32, [PTR]),
    "__uflow": ir.FunctionType(I32, [PTR]),
    "clock_gettime": ir.FunctionType(I32, [I32, PTR]),
    "fwrite": ir.FunctionType(I64, [PTR, I64, I64, PTR]),
    "fflush": ir.FunctionType(I32, [PTR]),
    "ferror": ir.FunctionType(I32, [PTR]),
    "malloc": ir.FunctionType(PTR, [I64]),
    "calloc": ir.FunctionType(PTR, [I64, I64]),
    "free": ir.FunctionType(VOID, [PTR]),
    "memmove": ir.FunctionType(PTR, [PTR, PTR, I64]),
    "memchr": ir.FunctionType(PTR, [PTR, I32, I64]),
    "strlen": ir.FunctionType(I64, [PTR]),
    "__errno_location": ir.FunctionType(PTR, []),
    "memcmp": ir.FunctionType(I32, [PTR, PTR, I64]),
    "memmem": ir.FunctionType(PTR, [PTR, I64, PTR, I64]),
    "openat": ir.FunctionType(I32, [I32, PTR, I32], var_arg=True),
    "read": ir.FunctionType(I64, [I64, PTR, I64]),
    "write": ir.FunctionType(I64, [I64, PTR, I64]),
    "close": ir.FunctionType(I32, [I64]),
}


def trap_asm(number: int = 0) -> str:
    """The trap instruction of one trap site: an undefined instruction holding the site's
    number (`ud1` on x86-64, `udf` on aarch64; SIGILL either way) — never llvm.trap."""
    return site_trap_asm(number)


WASM_TRAP_PREFIX = "cancho.trap."  # + the site number (trapsites.py), read from wasm backtraces
WASI_STDOUT_BUFFER = 4096  # glibc's buffer for a pipe (its st_blksize)


class FunctionView(ir.FormattedConstant):
    """A declared function's symbol seen with another function type. Pointers are opaque, so a
    call states the type it passes (`call i32 @write(i64 1, ...)`) and needs no cast; llvmlite
    takes the call's type from `function_type`."""

    def __init__(self, f: ir.Function, fnty: ir.FunctionType):
        super().__init__(ir.PointerType(), f.get_reference())
        self.function_type = fnty


class Runtime:
    """Declares what a module needs from libc, lazily, once each. On `wasm32-wasip1`
    (``target``), libc is reached through the adapters of ``wasi.py``, a trap is `llvm.trap`
    and the entry is the symbol wasi-libc's start-up calls."""

    def __init__(self, module: ir.Module, target: Target = HOST):
        self.module = module
        self.target = target
        self.argc = ir.GlobalVariable(module, I64, name="lexs_argc")
        self.argc.linkage = "internal"
        self.argc.initializer = ir.Constant(I64, 0)
        self.argv = ir.GlobalVariable(module, PTR, name="lexs_argv")
        self.argv.linkage = "internal"
        self.argv.initializer = ir.Constant(PTR, None)

    def libc(self, name: str) -> ir.Function:
        if self.target.is_wasi and name in WASI_C:
            return self._wasi_adapter(name)
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, LIBC[name], name=name)

    def call_c(self, b: ir.IRBuilder, name: str, fnty: ir.FunctionType, args: list) -> ir.Value:
        """Call the C symbol `name` with the type this call site needs, even when the module
        already declares it with another type (a user `extern fn write` next to the runtime's
        own use of `write`): the call then goes through a typed view of the same symbol."""
        if self.target.is_wasi and name in WASI_C and fnty == LIBC.get(name):
            return b.call(self._wasi_adapter(name), args)
        f = self.module.globals.get(name)
        if f is None:
            f = ir.Function(self.module, fnty, name=name)
        if f.function_type == fnty:
            return b.call(f, args)
        return b.call(FunctionView(f, fnty), args)

    def stream(self, name: str) -> ir.GlobalVariable:
        """The C `stdout`/`stderr` FILE* variables (glibc names; `__stdoutp` on Darwin)."""
        darwin = platform.system() == "Darwin" and not self.target.is_wasi
        sym = f"__{name}p" if darwin else name  # stdin/stdout/stderr
        g = self.module.globals.get(sym)
        if g is None:
            g = ir.GlobalVariable(self.module, PTR, name=sym)
            g.linkage = "external"
        return g

    def intrinsic(self, name: str, t: ir.Type) -> ir.Function:
        """`llvm.{sadd,ssub,smul}.with.overflow.i64`: returns {result, overflowed}."""
        full = f"{name}.i{t.width}"
        existing = self.module.globals.get(full)
        if existing is not None:
            return existing
        if name.endswith(".with.overflow"):
            fnty = ir.FunctionType(ir.LiteralStructType([t, ir.IntType(1)]), [t, t])
            return ir.Function(self.module, fnty, name=full)
        raise NotImplementedError(f"intrinsic {name}")

    def trap(self, b: ir.IRBuilder, number: int) -> None:
        """Trap site ``number``'s trap (``trapsites.py``), then `unreachable`."""
        if self.target.is_wasi:
            # WebAssembly: `llvm.trap` is the `unreachable` instruction, a trap the runtime
            # reports (the aarch64 reason to avoid it, `brk` and SIGTRAP, does not arise). It
            # is in a function of the site's own, whose name the runtime's backtrace shows.
            b.call(self._wasm_trap(number), [])
        else:
            b.call(ir.InlineAsm(ir.FunctionType(VOID, []), trap_asm(number), "", side_effect=True), [])
        b.unreachable()

    def _wasm_trap(self, number: int) -> ir.Function:
        """`cancho.trap.N`: never inlined or merged (cold, noinline, a distinct name the
        module's name section keeps), its body `llvm.trap`."""
        name = f"{WASM_TRAP_PREFIX}{number}"
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        f = ir.Function(self.module, ir.FunctionType(VOID, []), name=name)
        f.linkage = "internal"
        f.attributes.add("noinline")
        f.attributes.add("cold")
        f.attributes.add("noreturn")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        b.call(self._llvm_trap(), [])
        b.unreachable()
        return f

    def _llvm_trap(self) -> ir.Function:
        existing = self.module.globals.get("llvm.trap")
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(VOID, []), name="llvm.trap")

    def _wasi_stdout_buffering(self, b: ir.IRBuilder) -> None:
        """Buffer stdout as glibc does: a terminal line by line, anything else in 4 KiB blocks.
        wasi-libc line-buffers stdout whatever it is, so a program that traps would otherwise
        show lines a native build loses with its unflushed buffer."""
        I32_ = ir.IntType(32)
        isatty = ir.Function(self.module, ir.FunctionType(I32_, [I32_]), name="isatty")
        setvbuf = ir.Function(self.module, ir.FunctionType(I32_, [PTR, PTR, I32_, I32_]), name="setvbuf")
        buf = ir.GlobalVariable(self.module, ir.ArrayType(I8, WASI_STDOUT_BUFFER + 8), name="cancho.stdout.buffer")
        buf.linkage = "internal"
        buf.initializer = ir.Constant(buf.value_type, None)
        tty = b.icmp_signed("!=", b.call(isatty, [ir.Constant(I32_, 1)]), ir.Constant(I32_, 0))
        with b.if_then(b.not_(tty)):
            stream = b.load(self.stream("stdout"), typ=PTR)
            # musl keeps 8 bytes of the buffer for ungetc: 4104 bytes give 4096 of output.
            b.call(setvbuf, [stream, buf, ir.Constant(I32_, 0), ir.Constant(I32_, WASI_STDOUT_BUFFER + 8)])

    def _wasi_adapter(self, name: str) -> ir.Function:
        existing = self.module.globals.get(f"cancho.wasi.{name}")
        if existing is not None:
            return existing
        return build_adapter(self.module, name, LIBC[name])

    def malloc(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        return b.call(self.libc("malloc"), [n])

    def free(self, b: ir.IRBuilder, p: ir.Value) -> None:
        b.call(self.libc("free"), [p])

    def entry_wrapper(self, lexs_main: ir.Function) -> ir.Function:
        """C `int main(int argc, char **argv)`: stash argc/argv, run, truncate to i32. On WASI the
        symbol is `__main_argc_argv`, what a C compiler names such a `main` for wasm and what
        wasi-libc's start-up (`crt1-command.o`) calls before `exit`, which flushes stdio."""
        name = "__main_argc_argv" if self.target.is_wasi else "main"
        f = ir.Function(self.module, ir.FunctionType(I32, [I32, PTR]), name=name)
        b = ir.IRBuilder(f.append_basic_block("entry"))
        if self.target.is_wasi:
            self._wasi_stdout_buffering(b)
        b.store(b.sext(f.args[0], I64), self.argc)
        b.store(f.args[1], self.argv)
        r = b.call(lexs_main, [])
        b.ret(b.trunc(r, I32))
        return f
