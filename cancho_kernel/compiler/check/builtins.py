"""The prelude and the one builtin registry: name -> edition, signature, lowering, evaluation.

Most builtins have an ordinary signature, written here in cancho syntax and parsed with the
compiler's own parser, so calls to them go through the same checking as calls to user functions.
The rest (`split`, `release`, `narrow`, `contents`, file-system verbs whose labels depend on a
capability's literal) are checked at the call site by `builtin_calls.py`.

A builtin this implementation has no code for is still visible at its edition (so it cannot be
redeclared) and is refused at the call as `unsupported-on-target`. One that has a signature but no
lowering yet (`UNLOWERED`) is checked through it like any other, and the refusal waits until the
program is otherwise accepted (check/program.py), so every other rule fires first, as in the
reference. A supported builtin has a
lowering, registered with `LOWERINGS.register` next to its code in codegen/builtins.py, and a
compile-time evaluation (or an explicit refusal), registered with `EVALUATIONS.register` in
check/evaluate.py; tests/test_builtin_registry.py checks that the three agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

# Edition at which each builtin function name starts to resolve (runtime.md §1, language.md §2.2).
BUILTIN_EDITION: dict[str, int] = {}


def _add(edition: int, names: str) -> None:
    for n in names.split():
        BUILTIN_EDITION[n] = edition


_add(1, """putchar write_bytes write_err getchar split release narrow wrapping_add wrapping_sub
wrapping_mul byte_of int_of float_of truncate is_nan sqrt bits_of len box unbox contents box_slice
unbox_slice arg_count arg fs_read fs_write open_read file_read file_close trap""")
_add(2, "connect bind listen accept")
_add(3, "null_ptr")
_add(4, "spawn join fork_heap")
_add(5, """flush_out copy_within copy_into index_of_byte clock_ms clock_unix_ms fork_clock
open_append open_write open_new open_rw file_write file_pwrite file_pread file_sync file_truncate
file_size file_lock fs_rename fs_remove tcp_listen tcp_connect tcp_connect_start tcp_accept
conn_read conn_write conn_nonblocking conn_nodelay conn_peer conn_connect_status conn_detach
conn_attach conn_close listener_nonblocking listener_close poller_new poller_add_listener
poller_add_conn poller_modify poller_remove poller_wait poller_close udp_connect udp_bind udp_recv
udp_recv_from udp_send udp_send_to udp_local_port udp_nonblocking udp_close udp_detach udp_attach
poller_add_udp""")
_add(6, """signals_watch signals_pending poller_add_signals signals_close value_barrier f32_of
float_of32 bits_of32 f32_of_bits sqrt32 f32_of_int int_of_f32 open_dir dir_enter dir_open_read
dir_list dir_next dir_stat dir_open_new dir_open_append dir_rename dir_remove dir_sync dir_close
dir_list_close""")
_add(7, """float_of_bits exec_spawn exec_spawn_in child_wait child_kill pipe_open pipe_read
pipe_write pipe_nonblocking pipe_close child_end_close poller_add_pipe poller_add_child dir_mode
dir_own_mode dir_rename_new hw_aes_gcm aes_encrypt_block ghash_update aes_ctr32 ghash_powers gcm_tag
gcm_tag_diff mul_wide add_carry sub_borrow""")
_add(8, "load_le64 byte_mask64 trailing_zeros leading_zeros popcount")

# Prelude type names (capabilities, handles, result enums, scalars) and their editions.
PRELUDE_TYPE_EDITION: dict[str, int] = {
    "int": 1, "bool": 1, "byte": 1, "float": 1, "c_int": 1, "c_ptr": 3, "f32": 6,
    "World": 1, "Io": 1, "Ffi": 1, "Fs": 1, "Heap": 1, "Args": 1, "Split": 1, "Box": 1,
    "File": 1, "Opened": 1, "Read": 1,
    "Net": 2, "Thread": 4, "Clock": 5, "Done": 5, "Listener": 5, "Conn": 5, "Udp": 5, "Poller": 5,
    "Signals": 6, "Dir": 6, "SignalWatch": 6, "Exec": 7, "Child": 7, "Pipe": 7, "ChildEnd": 7,
    # Handles and result enums that (for now) only builtins in `UNLOWERED` make or take.
    "Listening": 5, "Dialed": 5, "Accepted": 5, "Received": 5, "Sent": 5, "UdpOpened": 5, "Datagram": 5,
    "Polling": 5, "Attached": 5, "Watching": 6,
    "DirList": 6, "DirOpened": 6, "Listing": 6, "Listed": 6, "DirStat": 6,
    "Stdio": 7, "Piped": 7, "Spawned": 7, "Exited": 7,
}


CAPABILITY_KINDS = {"World", "Io", "Ffi", "Fs", "Heap", "Args", "Net", "Clock", "Signals", "Exec"}
LITERAL_CAPS = {"Ffi", "Fs", "Net", "Signals", "Exec"}
HANDLE_TYPES = {"File", "Listener", "Conn", "Udp", "Poller", "Dir", "DirList", "SignalWatch", "Child", "Pipe",
                "ChildEnd"}
# Result enums of the prelude (declared in check/typetable.py's PRELUDE_DECLS).
PRELUDE_ENUMS = frozenset({"Opened", "Read", "Done", "DirOpened", "Listing", "Listed", "DirStat", "Listening",
                           "Dialed", "Accepted", "Received", "Sent", "UdpOpened", "Datagram", "Stdio", "Piped",
                           "Spawned", "Exited", "Polling", "Attached", "Watching"})

# Fields of `Split` per edition (language.md §2.2). Edition 8 follows the fixture-backed reading.
SPLIT_FIELDS: dict[int, tuple[tuple[str, str], ...]] = {}
_base = (("io", "Io"), ("ffi", "Ffi"), ("fs", "Fs"), ("heap", "Heap"), ("args", "Args"))
for _e in range(1, 9):
    f = list(_base)
    if _e >= 2:
        f.append(("net", "Net"))
    if _e >= 5:
        f.append(("clock", "Clock"))
    if _e >= 6:
        f.append(("signals", "Signals"))
    if _e >= 7:
        f.append(("exec", "Exec"))
    SPLIT_FIELDS[_e] = tuple(f)

# Ordinary builtin signatures, in cancho syntax. Effects are the written rows.
SIGNATURES: dict[str, str] = {
    "putchar": "fn putchar[&i](io: &!i Io, c: int) -> [io_write] int",
    "write_bytes": "fn write_bytes[&i, &b](io: &!i Io, bytes: &b [byte]) -> [io_write] int",
    "write_err": "fn write_err[&i, &b](io: &!i Io, bytes: &b [byte]) -> [err_write] int",
    "getchar": "fn getchar[&i](io: &!i Io) -> [io_read] int",
    "flush_out": "fn flush_out[&i](io: &!i Io) -> [io_write] Done",
    "wrapping_add": "fn wrapping_add(a: int, b: int) -> [] int",
    "wrapping_sub": "fn wrapping_sub(a: int, b: int) -> [] int",
    "wrapping_mul": "fn wrapping_mul(a: int, b: int) -> [] int",
    "byte_of": "fn byte_of(n: int) -> [] byte",
    "int_of": "fn int_of(b: byte) -> [] int",
    "float_of": "fn float_of(n: int) -> [] float",
    "truncate": "fn truncate(x: float) -> [] int",
    "is_nan": "fn is_nan(x: float) -> [] bool",
    "sqrt": "fn sqrt(x: float) -> [] float",
    "bits_of": "fn bits_of(x: float) -> [] int",
    "float_of_bits": "fn float_of_bits(n: int) -> [] float",
    "trap": "fn trap() -> [] int",
    "len": "fn len[T, &r](s: &r [T]) -> [] int",
    "arg_count": "fn arg_count[&a](a: &a Args) -> [args] int",
    "arg": "fn arg[&a](a: &a Args, n: int) -> [args] &static [byte]",
    "box": "fn box[T, &x](h: &!x Heap, value: T) -> [heap] Box[T]",
    "unbox": "fn unbox[T, &x](h: &!x Heap, b: Box[T]) -> [heap] T",
    "box_slice": "fn box_slice[T: val, &x](h: &!x Heap, count: int, fill: T) -> [heap] Box[[T]]",
    "unbox_slice": "fn unbox_slice[T, &x](h: &!x Heap, b: Box[[T]]) -> [heap] int",
    "file_read": "fn file_read[&x, &b](handle: &!x File, room: &!b [byte]) -> [file_read] Read",
    "file_close": "fn file_close(file: File) -> [] int",
    "null_ptr": "fn null_ptr() -> [] c_ptr",
    "clock_ms": "fn clock_ms[&c](clock: &c Clock) -> [clock] int",
    "clock_unix_ms": "fn clock_unix_ms[&c](clock: &c Clock) -> [clock] int",
    "fork_clock": "fn fork_clock[&c](clock: &c Clock) -> [] Clock",
    "value_barrier": "fn value_barrier(x: int) -> [] int",
    "trailing_zeros": "fn trailing_zeros(x: int) -> [] int",
    "leading_zeros": "fn leading_zeros(x: int) -> [] int",
    "popcount": "fn popcount(x: int) -> [] int",
    "copy_within": "fn copy_within[&r](buf: &!r [byte], dst: int, src: int, n: int) -> [] int",
    "copy_into": "fn copy_into[&d, &s](dst: &!d [byte], src: &s [byte]) -> [] int",
    "index_of_byte": "fn index_of_byte[&t](text: &t [byte], b: byte) -> [] int",
    "load_le64": "fn load_le64[&t](text: &t [byte], at: int) -> [] int",
    "byte_mask64": "fn byte_mask64[&t](text: &t [byte], at: int, b: byte) -> [] int",
    "f32_of": "fn f32_of(x: float) -> [] f32",
    "float_of32": "fn float_of32(x: f32) -> [] float",
    "bits_of32": "fn bits_of32(x: f32) -> [] int",
    "f32_of_bits": "fn f32_of_bits(n: int) -> [] f32",
    "sqrt32": "fn sqrt32(x: f32) -> [] f32",
    "f32_of_int": "fn f32_of_int(n: int) -> [] f32",
    "int_of_f32": "fn int_of_f32(x: f32) -> [] int",
    # Words read as unsigned 64-bit integers; a carry or borrow in counts when nonzero.
    "mul_wide": "fn mul_wide(a: int, b: int) -> [] (int, int)",
    "add_carry": "fn add_carry(a: int, b: int, carry_in: int) -> [] (int, int)",
    "sub_borrow": "fn sub_borrow(a: int, b: int, borrow_in: int) -> [] (int, int)",
    # Socket handles (edition 5): the authority is spent where a handle is minted; the verbs on
    # a borrowed handle perform path-free labels named after the direction.
    "tcp_accept": "fn tcp_accept[&l](listener: &!l Listener) -> [conn_accept] Accepted",
    "conn_read": "fn conn_read[&c, &b](conn: &!c Conn, buf: &!b [byte]) -> [conn_read] Received",
    "conn_write": "fn conn_write[&c, &b](conn: &!c Conn, bytes: &b [byte]) -> [conn_write] Sent",
    "conn_nonblocking": "fn conn_nonblocking[&c](conn: &!c Conn) -> [] int",
    "conn_close": "fn conn_close(conn: Conn) -> [] int",
    "listener_nonblocking": "fn listener_nonblocking[&l](listener: &!l Listener) -> [] int",
    "listener_close": "fn listener_close(listener: Listener) -> [] int",
    "udp_recv": "fn udp_recv[&u, &b](sock: &!u Udp, buf: &!b [byte]) -> [udp_recv] Datagram",
    "udp_send": "fn udp_send[&u, &b](sock: &!u Udp, bytes: &b [byte]) -> [udp_send] Sent",
    "udp_send_to": "fn udp_send_to[&u, &b](sock: &!u Udp, bytes: &b [byte], ticket: int) -> [udp_send] Sent",
    "udp_local_port": "fn udp_local_port[&u](sock: &u Udp) -> [] int",
    "udp_nonblocking": "fn udp_nonblocking[&u](sock: &!u Udp) -> [] int",
    "udp_close": "fn udp_close(sock: Udp) -> [] int",
    # Directory handles (edition 6; modes and `dir_rename_new` edition 7): the path is spent at
    # `open_dir` (label `fs_read(p)`, checked at the call site); the steps beneath perform
    # `dir_read` or `dir_write`, which name no path (lowered in codegen/dirs.py).
    "dir_enter": "fn dir_enter[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_read] DirOpened",
    "dir_open_read": "fn dir_open_read[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_read] Opened",
    "dir_close": "fn dir_close(dir: Dir) -> [] int",
    "dir_list": "fn dir_list[&d](dir: &d Dir) -> [dir_read] Listing",
    "dir_next": "fn dir_next[&l, &n](list: &!l DirList, name: &!n [byte]) -> [dir_read] Listed",
    "dir_list_close": "fn dir_list_close(list: DirList) -> [] int",
    "dir_stat": "fn dir_stat[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_read] DirStat",
    "dir_open_new": "fn dir_open_new[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_write] Opened",
    "dir_open_append": "fn dir_open_append[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_write] Opened",
    "dir_rename": "fn dir_rename[&d, &f, &t](dir: &d Dir, from: &f [byte], to: &t [byte]) -> [dir_write] Done",
    "dir_rename_new": "fn dir_rename_new[&d, &f, &t](dir: &d Dir, from: &f [byte], to: &t [byte]) -> [dir_write] Done",
    "dir_remove": "fn dir_remove[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_write] Done",
    "dir_sync": "fn dir_sync[&d](dir: &d Dir) -> [dir_write] Done",
    "dir_mode": "fn dir_mode[&d, &n](dir: &d Dir, name: &n [byte]) -> [dir_read] Done",
    "dir_own_mode": "fn dir_own_mode[&d](dir: &d Dir) -> [dir_read] Done",
    # Processes (edition 7): a channel and a child are `res` handles; starting one is a
    # capability verb (`CAP_VERBS`); ending a handle performs nothing.
    "pipe_open": "fn pipe_open() -> [] Piped",
    "child_wait": "fn child_wait(child: Child) -> [] Exited",
    "child_kill": "fn child_kill[&c](child: &c Child, signal: int) -> [child_signal] int",
    "pipe_read": "fn pipe_read[&p, &b](pipe: &!p Pipe, buf: &!b [byte]) -> [pipe_read] Received",
    "pipe_write": "fn pipe_write[&p, &b](pipe: &!p Pipe, bytes: &b [byte]) -> [pipe_write] Sent",
    "pipe_nonblocking": "fn pipe_nonblocking[&p](pipe: &!p Pipe) -> [] int",
    "pipe_close": "fn pipe_close(pipe: Pipe) -> [] int",
    "child_end_close": "fn child_end_close(end: ChildEnd) -> [] int",
    # File handles' write side (edition 5): one system call each, the answer a `Done` or `Read`;
    # the opens and path verbs (`open_append`, `fs_rename`, ...) are checked at the call site.
    "file_write": "fn file_write[&f, &b](file: &!f File, bytes: &b [byte]) -> [file_write] Done",
    "file_pwrite": "fn file_pwrite[&f, &b](file: &!f File, at: int, bytes: &b [byte]) -> [file_write] Done",
    "file_pread": "fn file_pread[&f, &b](file: &!f File, at: int, into: &!b [byte]) -> [file_read] Read",
    "file_sync": "fn file_sync[&f](file: &!f File) -> [file_write] Done",
    "file_truncate": "fn file_truncate[&f](file: &!f File, size: int) -> [file_write] Done",
    "file_size": "fn file_size[&f](file: &!f File) -> [file_read] Done",
    "file_lock": "fn file_lock[&f](file: &!f File) -> [file_write] Done",
    # Block-cipher steps (edition 7): pure; a wrong length traps.
    "hw_aes_gcm": "fn hw_aes_gcm() -> [] bool",
    "aes_encrypt_block": ("fn aes_encrypt_block[&k, &b, &o](round_keys: &k [byte], rounds: int, block: &b [byte], "
                          "out: &!o [byte]) -> [] int"),
    "ghash_update": "fn ghash_update[&h, &y, &d](h: &h [byte], y: &!y [byte], data: &d [byte]) -> [] int",
    # The multi-block ones of the reference's docs/gcm-wide.md (counter mode, GHASH's powers, the tag).
    "aes_ctr32": ("fn aes_ctr32[&k, &n, &i, &o](round_keys: &k [byte], rounds: int, nonce: &n [byte], counter: int, "
                  "input: &i [byte], out: &!o [byte]) -> [] int"),
    "ghash_powers": "fn ghash_powers[&h, &t](h: &h [byte], table: &!t [byte]) -> [] int",
    "gcm_tag": ("fn gcm_tag[&k, &t, &n, &a, &x, &o](round_keys: &k [byte], rounds: int, table: &t [byte], "
                "nonce: &n [byte], aad: &a [byte], text: &x [byte], tag: &!o [byte]) -> [] int"),
    "gcm_tag_diff": ("fn gcm_tag_diff[&k, &t, &n, &a, &x, &e](round_keys: &k [byte], rounds: int, table: &t [byte], "
                     "nonce: &n [byte], aad: &a [byte], text: &x [byte], expected: &e [byte]) -> [] int"),
}

# Builtins whose first argument borrows a capability with a literal and whose label carries that
# literal (`exec("/bin")`, `net_out("host:port")`): name -> (capability kind, label, template).
# The template is written with `""`; the call's own literal replaces it in the capability and in
# the label (builtin_calls.py).
CAP_VERBS: dict[str, tuple[str, str, str]] = {
    "exec_spawn": ("Exec", "exec",
                   "fn exec_spawn[&x, &p, &a, &v](exec: &x Exec(\"\"), path: &p [byte], args: &a [byte], "
                   "env: &v [byte], stdin: Stdio, stdout: Stdio, stderr: Stdio) -> [exec(\"\")] Spawned"),
    "exec_spawn_in": ("Exec", "exec",
                      "fn exec_spawn_in[&x, &d, &p, &a, &v](exec: &x Exec(\"\"), dir: &d Dir, path: &p [byte], "
                      "args: &a [byte], env: &v [byte], stdin: Stdio, stdout: Stdio, stderr: Stdio) "
                      "-> [exec(\"\")] Spawned"),
    "tcp_listen": ("Net", "net_in",
                   "fn tcp_listen[&n](net: &n Net(\"\"), port: int, backlog: int, flags: int) -> [net_in(\"\")] Listening"),
    "tcp_connect": ("Net", "net_out",
                    "fn tcp_connect[&n, &h](net: &n Net(\"\"), host: &h [byte], port: int) -> [net_out(\"\")] Dialed"),
    "udp_connect": ("Net", "net_out",
                    "fn udp_connect[&n, &h](net: &n Net(\"\"), host: &h [byte], port: int) -> [net_out(\"\")] UdpOpened"),
    # `flags` bit 1 is SO_REUSEPORT, as tcp_listen's (the reference's udp.md §3, §10).
    "udp_bind": ("Net", "net_in",
                 "fn udp_bind[&n](net: &n Net(\"\"), port: int, flags: int) -> [net_in(\"\")] UdpOpened"),
}

# Network (editions 2 and 5), the poller and signals (edition 6): the rest of the reference's
# signatures (codegen/net.py lowers them; docs/native-sockets.md, docs/signals.md there).
SIGNATURES.update({
    "listen": "fn listen(fd: int, backlog: int) -> [] int",
    "accept": "fn accept(fd: int) -> [] int",
    "conn_nodelay": "fn conn_nodelay[&c](conn: &!c Conn) -> [] int",
    "conn_peer": "fn conn_peer[&c, &b](conn: &c Conn, out: &!b [byte]) -> [] int",
    "conn_connect_status": "fn conn_connect_status[&c](conn: &!c Conn) -> [] int",
    "conn_detach": "fn conn_detach(conn: Conn) -> [] int",
    "conn_attach": "fn conn_attach(ticket: int) -> [] Attached",
    "udp_recv_from": "fn udp_recv_from[&u, &b, &t](sock: &!u Udp, buf: &!b [byte], ticket: &!t [int]) "
                     "-> [udp_recv] Datagram",
    "udp_detach": "fn udp_detach(sock: Udp) -> [] int",
    "udp_attach": "fn udp_attach(ticket: int) -> [] UdpOpened",
    "poller_new": "fn poller_new() -> [] Polling",
    "poller_add_listener": "fn poller_add_listener[&p, &l](poller: &!p Poller, listener: &l Listener, token: int) "
                           "-> [poll] int",
    "poller_add_conn": "fn poller_add_conn[&p, &c](poller: &!p Poller, conn: &c Conn, token: int, events: int) "
                       "-> [poll] int",
    "poller_add_udp": "fn poller_add_udp[&p, &u](poller: &!p Poller, sock: &u Udp, token: int, events: int) "
                      "-> [poll] int",
    "poller_add_pipe": "fn poller_add_pipe[&p, &q](poller: &!p Poller, pipe: &q Pipe, token: int, events: int) "
                       "-> [poll] int",
    "poller_add_child": "fn poller_add_child[&p, &c](poller: &!p Poller, child: &c Child, token: int) -> [poll] int",
    "poller_add_signals": "fn poller_add_signals[&p, &w](poller: &!p Poller, watch: &w SignalWatch, token: int) "
                          "-> [poll] int",
    "poller_modify": "fn poller_modify[&p, &c](poller: &!p Poller, conn: &c Conn, token: int, events: int) "
                     "-> [poll] int",
    "poller_remove": "fn poller_remove[&p, &c](poller: &!p Poller, conn: &c Conn) -> [poll] int",
    "poller_wait": "fn poller_wait[&p, &o](poller: &!p Poller, out: &!o [int], timeout_ms: int) -> [poll] int",
    "poller_close": "fn poller_close(poller: Poller) -> [] int",
    "signals_pending": "fn signals_pending[&w](watch: &!w SignalWatch) -> [signals_read] int",
    "signals_close": "fn signals_close(watch: SignalWatch) -> [] int",
})
CAP_VERBS.update({
    "connect": ("Net", "net_out", "fn connect[&n, &h](net: &n Net(\"\"), name: &h [byte], port: int) -> [net_out(\"\")] int"),
    "bind": ("Net", "net_in", "fn bind[&n](net: &n Net(\"\"), port: int) -> [net_in(\"\")] int"),
    "tcp_connect_start": ("Net", "net_out",
                          "fn tcp_connect_start[&n, &h](net: &n Net(\"\"), host: &h [byte], port: int) "
                          "-> [net_out(\"\")] Dialed"),
    "signals_watch": ("Signals", "signals",
                      "fn signals_watch[&s](signals: &s Signals(\"\")) -> [signals(\"\")] Watching"),
})

# Builtins checked at the call site (builtin_calls.py) rather than through a signature.
CALL_SITE = frozenset({"split", "release", "narrow", "contents", "open_read", "fs_read", "fs_write",
                       "open_dir", "open_append", "open_write", "open_new", "open_rw", "fs_rename",
                       "fs_remove"}) | frozenset(CAP_VERBS)
# Threads (edition 4): typed from the payload and the function value (check/threads.py).
CALL_SITE |= frozenset({"spawn", "join", "fork_heap"})

# Checked (a signature above, or at the call site) but not lowered by this implementation: a call
# is refused as `unsupported-on-target` only once the rest of the program is accepted.
UNLOWERED = (frozenset(CAP_VERBS) - {"exec_spawn", "exec_spawn_in"}) | frozenset({
    "tcp_accept", "conn_read", "conn_write", "conn_nonblocking", "conn_close", "listener_nonblocking",
    "listener_close", "udp_recv", "udp_send", "udp_send_to", "udp_local_port", "udp_nonblocking", "udp_close"})


# Lowered by codegen/net.py (issue 14): the network, the poller and signals.
NET_LOWERED = frozenset({"connect", "bind", "tcp_listen", "tcp_connect", "tcp_connect_start", "udp_connect",
                         "udp_bind", "signals_watch", "tcp_accept", "conn_read", "conn_write", "conn_nonblocking",
                         "conn_close", "listener_nonblocking", "listener_close", "udp_recv", "udp_send",
                         "udp_send_to", "udp_local_port", "udp_nonblocking", "udp_close"})
UNLOWERED = UNLOWERED - NET_LOWERED


@dataclass(frozen=True)
class Builtin:
    """One prelude function: the edition it appears at and how a call to it is typed."""

    name: str
    edition: int
    signature: str | None  # cancho text; None when checked at the call site or unsupported

    @property
    def checked(self) -> bool:
        """Does the checker type a call to it (through a signature or at the call site)?"""
        return self.signature is not None or self.name in CALL_SITE

    @property
    def supported(self) -> bool:
        """Does this implementation check, lower and evaluate it (else `unsupported-on-target`)?"""
        return self.checked and self.name not in UNLOWERED


BUILTINS: dict[str, Builtin] = {n: Builtin(n, e, SIGNATURES.get(n)) for n, e in sorted(BUILTIN_EDITION.items())}
assert set(SIGNATURES) | CALL_SITE <= set(BUILTINS)
assert UNLOWERED <= set(SIGNATURES) | CALL_SITE


class Implementations:
    """Builtin name -> implementation of one kind (lowering or evaluation), filled by `register`
    where each implementation is written, once, at import; read-only afterwards."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._table: dict[str, Callable] = {}

    def register(self, *names: str) -> Callable[[Callable], Callable]:
        def add(impl: Callable) -> Callable:
            for n in names:
                if n not in BUILTINS or not BUILTINS[n].supported:
                    raise ValueError(f"{self.kind} registered for `{n}`, which is no supported builtin")
                if n in self._table:
                    raise ValueError(f"a second {self.kind} registered for `{n}`")
                self._table[n] = impl
            return impl
        return add

    def get(self, name: str) -> Callable | None:
        return self._table.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)


LOWERINGS = Implementations("lowering")
EVALUATIONS = Implementations("compile-time evaluation")


def builtin_visible(name: str, edition: int) -> bool:
    """Is `name` a builtin function in a file of this edition?"""
    e = BUILTIN_EDITION.get(name)
    return e is not None and e <= edition


def prelude_type_visible(name: str, edition: int) -> bool:
    """Is `name` a prelude type in a file of this edition?"""
    e = PRELUDE_TYPE_EDITION.get(name)
    return e is not None and e <= edition
