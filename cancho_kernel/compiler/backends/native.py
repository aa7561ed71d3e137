"""LLVM plumbing shared by both backends: initialisation, the host target machine, parsing,
O2 optimisation and code emission.

Everything here takes LLVM IR *text* (what codegen produces) so that the two backends and the
`ir`/`asm` commands see exactly the same module. Failures to parse or verify that text are the
compiler's own bugs, never the program's, so they raise :class:`InvalidIR`, which callers turn
into a diagnostic with rule ``internal``.

llvmlite 0.50 notes (runtime.md §13): ``llvm.initialize()`` raises, and the native asm *parser*
must be initialised too, or emitting an object for a module containing the ``ud2`` trap (inline
asm) aborts the whole process.
"""

from __future__ import annotations

import llvmlite.binding as llvm

from .. import cpu
from ..target import HOST, WASI_LLVM_TRIPLE, Target

# The one piece of module state: LLVM's own target registries are process-global, and
# initialising them twice is harmless but not free, so remember that it was done.
_initialised = False
_all_targets = False


class InvalidIR(Exception):
    """LLVM refused the IR text codegen produced: a compiler bug, reported as rule `internal`."""


def ensure_initialised() -> None:
    """Initialise LLVM's native target, asm printer and asm parser once per process."""
    global _initialised
    if not _initialised:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        _initialised = True


def ensure_all_targets() -> None:
    """Also initialise every target LLVM was built with (WebAssembly among them), once."""
    global _all_targets
    ensure_initialised()
    if not _all_targets:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _all_targets = True


def target_triple(target: Target = HOST) -> str:
    """The triple codegen stamps on a module built for ``target``."""
    return WASI_LLVM_TRIPLE if target.is_wasi else host_triple()


def host_triple() -> str:
    """The triple codegen stamps on modules (and `--version` prints)."""
    ensure_initialised()
    return llvm.get_process_triple()


def target_machine(jit: bool = False, target: Target = HOST) -> llvm.TargetMachine:
    """A fresh host target machine: PIC, O2, for the CPU ``CANCHO_CPU`` chooses (compiler/cpu.py:
    the host's CPU and features by default, the architecture's baseline with ``baseline``).

    Creating one costs well under a millisecond, so none is cached. The same CPU and features
    are used for objects and for MCJIT so both backends run the same machine code.
    """
    if target.is_wasi:
        # Static relocation: a WASI command is one statically linked module. LLVM's generic
        # wasm32 CPU links with Debian's wasi-libc and runs under wasmtime (tests/test_wasm_target.py).
        ensure_all_targets()
        return llvm.Target.from_triple(WASI_LLVM_TRIPLE).create_target_machine(
            cpu="generic", opt=2, reloc="static")
    ensure_initialised()
    machine = llvm.Target.from_triple(host_triple())
    chosen = cpu.llvm_cpu()
    return machine.create_target_machine(
        cpu=chosen.name,
        features=chosen.features,
        opt=2,
        reloc="pic",
        codemodel="jitdefault" if jit else "default",
        jit=jit,
    )


def data_layout(target: Target = HOST) -> str:
    """The data layout string codegen stamps on modules (the host's by default)."""
    return str(target_machine(target=target).target_data)


def parse(ir_text: str) -> llvm.ModuleRef:
    """Parse and verify IR text; stamp the host triple and data layout when the text has none.

    Raises :class:`InvalidIR` when LLVM refuses the text (our bug, never the program's).
    """
    ensure_initialised()
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as exc:
        raise InvalidIR(str(exc).strip()) from None
    if not mod.triple:
        mod.triple = host_triple()
    if not mod.data_layout:
        mod.data_layout = data_layout()
    return mod


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine | None = None) -> None:
    """Run the new pass manager's O2 pipeline in place.

    -O2 is not optional: codegen keeps every local in an alloca and relies on mem2reg/SROA
    (runtime.md §0).
    """
    tm = tm or target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def optimized_module(ir_text: str, tm: llvm.TargetMachine | None = None) -> llvm.ModuleRef:
    """Parse, verify and optimise IR text."""
    mod = parse(ir_text)
    optimize(mod, tm)
    return mod


def optimized_ir(ir_text: str, target: Target = HOST) -> str:
    """The O2-optimised IR text (what `cancho ir` and the `%%ir` magic show)."""
    return str(optimized_module(ir_text, target_machine(target=target)))


def emit_object(ir_text: str, target: Target = HOST) -> bytes:
    """A relocatable object (ELF for the host, WebAssembly for WASI), after O2."""
    tm = target_machine(target=target)
    return tm.emit_object(optimized_module(ir_text, tm))


def emit_asm(ir_text: str, target: Target = HOST) -> str:
    """Assembly text after O2, the host's by default (what `cancho asm` and the `%%asm` magic
    show; WebAssembly's text form for WASI)."""
    tm = target_machine(target=target)
    return tm.emit_assembly(optimized_module(ir_text, tm))
