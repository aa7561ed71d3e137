"""Targets: which machine a program is built for, and what each target cannot do.

Two targets exist. The host (the default, also spelled as its LLVM triple, e.g.
``x86_64-unknown-linux-gnu``) and ``wasm32-wasip1``: WebAssembly under WASI preview 1, built
through the same LLVM IR for the wasm32 triple and linked against a WASI libc.

What WASI lacks is one table, here (:data:`WASI_GAPS`), never an ``if`` at a call site: a
builtin there is refused by ``check``/``build``/``run --target wasm32-wasip1`` at the function
that reaches it, with rule ``unsupported-on-target``, before any code is generated, so no
toolchain is needed to learn that a program cannot become a WASI module. The words name the
family (``threads do not exist on `wasm32-wasip1` ``), because the family, not the builtin,
is what a reader has to design around.

A builtin that WASI could do but this compiler has not carried to the target yet (its
constants or structure layouts are Linux's: directory handles, the later file builtins) is refused
the same way with different words (:data:`WASI_BUILT` lists the ones that are carried): a
located refusal, never a module that answers wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Optional

from .diagnostics import Diagnostic, Rule

if TYPE_CHECKING:
    from .check.program import CheckedProgram

WASI_TRIPLE_NAME = "wasm32-wasip1"
# What LLVM and Debian's clang 14 call the same target (clang 14 predates the `wasip1` spelling).
WASI_LLVM_TRIPLE = "wasm32-unknown-wasi"


class TargetKind(Enum):
    HOST = "host"
    WASI = "wasi"


@dataclass(frozen=True)
class Target:
    """A build target: its kind and the name the user spelled (the host's triple by default)."""

    kind: TargetKind
    name: str

    @property
    def is_wasi(self) -> bool:
        return self.kind is TargetKind.WASI


HOST = Target(TargetKind.HOST, "host")
WASM32_WASIP1 = Target(TargetKind.WASI, WASI_TRIPLE_NAME)


class UnknownTarget(ValueError):
    """A ``--target`` this compiler cannot build for (a usage error, exit 2)."""


def parse_target(name: str, host_triple: str) -> Target:
    """The target a ``--target`` value names: ``wasm32-wasip1`` (or LLVM's ``wasm32-wasi``
    spelling), or the host's own triple, which is the default made explicit."""
    if name in (WASI_TRIPLE_NAME, "wasm32-wasi", WASI_LLVM_TRIPLE):
        return WASM32_WASIP1
    if name in (host_triple, "host"):
        return Target(TargetKind.HOST, host_triple)
    raise UnknownTarget(f"unknown target `{name}`: cancho-kernel builds for the host "
                        f"(`{host_triple}`) and for `{WASI_TRIPLE_NAME}`")


class Gap(Enum):
    """A kind of thing WASI preview 1 does not have. ``noun`` is plural (the sentence says
    "... do not exist on"); ``why`` says what is missing, which tells a reader whether it will
    ever change."""

    THREADS = ("threads", "a WASI preview 1 module has a single thread of control "
               "(wasi-threads is still a proposal)")
    SOCKETS = ("sockets", "preview 1 gives a module no way to open a connection or a listening "
               "socket (sockets come with WASI preview 2)")
    POLLER = ("pollers", "there is no epoll or kqueue to wait on, and the poller is not mapped "
              "onto `poll_oneoff`")
    SIGNALS = ("signals", "a WASI module receives no signals")
    PROCESSES = ("processes and pipes", "a WASI module cannot start another program or make a pipe")
    LOCKS = ("file locks", "WASI has no `flock`")
    PERMISSIONS = ("permission bits", "WASI's `stat` reports a file's type and no mode bits, so "
                   "the answer would be 0 for every file")
    NO_REPLACE_RENAMES = ("no-replace renames", "WASI's `path_rename` always replaces an existing "
                          "destination, so refusing to replace could only be a check followed by "
                          "a rename, the race the builtin exists to exclude")

    def __init__(self, noun: str, why: str) -> None:
        self.noun = noun
        self.why = why


def _gaps(gap: Gap, names: str) -> dict[str, Gap]:
    return {n: gap for n in names.split()}


# Builtin -> what WASI preview 1 lacks for it: the one per-target table.
WASI_GAPS: dict[str, Gap] = {
    **_gaps(Gap.THREADS, "spawn join fork_heap fork_clock"),
    **_gaps(Gap.SOCKETS, """connect bind listen tcp_listen tcp_connect tcp_connect_start
        tcp_accept conn_read conn_write conn_nonblocking conn_nodelay conn_peer conn_connect_status
        conn_detach conn_attach conn_close listener_nonblocking listener_close udp_connect udp_bind
        udp_recv udp_recv_from udp_send udp_send_to udp_local_port udp_nonblocking udp_close
        udp_detach udp_attach"""),
    **_gaps(Gap.POLLER, """poller_new poller_add_listener poller_add_conn poller_add_udp
        poller_add_signals poller_add_pipe poller_add_child poller_modify poller_remove
        poller_wait poller_close"""),
    **_gaps(Gap.SIGNALS, "signals_watch signals_pending signals_close"),
    **_gaps(Gap.PROCESSES, """exec_spawn exec_spawn_in child_wait child_kill child_end_close
        pipe_open pipe_read pipe_write pipe_nonblocking pipe_close"""),
    **_gaps(Gap.LOCKS, "file_lock"),
    **_gaps(Gap.PERMISSIONS, "dir_mode dir_own_mode"),
    **_gaps(Gap.NO_REPLACE_RENAMES, "dir_rename_new"),
}

# Builtins this compiler builds for WASI, each run there by tests/test_wasm_target.py or by a
# program that test runs: the console (wasi-libc's stdio), the heap (its malloc), the command
# line, the clocks (wasi-libc's clock ids, codegen/wasi.py), files by path and their handles
# (wasi-libc's open flags; errno translated), and everything that touches no operating system.
WASI_BUILT: frozenset[str] = frozenset("""
    putchar write_bytes write_err getchar flush_out split release narrow
    box unbox contents box_slice unbox_slice arg_count arg len trap null_ptr
    wrapping_add wrapping_sub wrapping_mul byte_of int_of float_of truncate is_nan sqrt bits_of
    float_of_bits f32_of float_of32 bits_of32 f32_of_bits sqrt32 f32_of_int int_of_f32
    copy_within copy_into index_of_byte load_le64 byte_mask64 trailing_zeros leading_zeros
    popcount mul_wide add_carry sub_borrow value_barrier clock_ms clock_unix_ms
    open_read file_read file_close fs_read fs_write
""".split())

assert not WASI_BUILT & set(WASI_GAPS)


@dataclass(frozen=True)
class TargetRefusal:
    """Why one builtin cannot be built for a target: a gap of the target, or (``gap`` None) a
    builtin not carried to it yet."""

    builtin: str
    gap: Optional[Gap]

    def message(self, fn_name: str, target: Target) -> str:
        if self.gap is not None:
            return (f"`{fn_name}` uses `{self.builtin}`, and {self.gap.noun} do not exist on "
                    f"`{target.name}`: {self.gap.why}")
        return (f"`{fn_name}` uses `{self.builtin}`, which cancho-kernel does not build for "
                f"`{target.name}` yet: its operating-system constants, layouts and error numbers "
                "there are not carried over from Linux's")


def refusal_for(builtin: str, target: Target) -> Optional[TargetRefusal]:
    """What stops ``builtin`` on ``target`` (None: nothing; the host lacks nothing)."""
    if not target.is_wasi or builtin in WASI_BUILT:
        return None
    return TargetRefusal(builtin, WASI_GAPS.get(builtin))


def target_refusals(program: "CheckedProgram", target: Target) -> list[Diagnostic]:
    """One refusal per (reachable function, family) — the not-yet-carried count as one family —
    naming the first such builtin the function calls, at the function's name. Where the target
    lacks something the program needs, only that is said: what is merely not carried yet would
    not make the program buildable."""
    from .authority import display_name
    from .check.typed import CallKind, CallTarget

    if not target.is_wasi:
        return []
    found: list[tuple[TargetRefusal, Diagnostic]] = []
    for key in program.reachable():
        fn = program.fns.get(key)
        if fn is None:
            continue
        seen: set[object] = set()
        for _, res in fn.typed.resolved.items():
            if not isinstance(res, CallTarget) or res.kind is not CallKind.BUILTIN:
                continue
            refusal = refusal_for(res.name, target)
            if refusal is None or refusal.gap in seen:  # None: the not-carried, as one family
                continue
            seen.add(refusal.gap)
            found.append((refusal, Diagnostic(Rule.UNSUPPORTED_ON_TARGET,
                                              refusal.message(display_name(key), target),
                                              fn.item.decl.name.span)))
    gaps = [d for r, d in found if r.gap is not None]
    return gaps or [d for _, d in found]
