"""Run one WASI command module with wasmtime, as a child of `cancho run --target wasm32-wasip1`.

``python -m cancho_kernel.compiler.backends.wasi_runner [--dir=HOST[::GUEST]]... MODULE ARGV0
[ARG...]``: the module gets this process's stdin, stdout and stderr, the command line
``ARGV0 ARG...``, no environment, and only the directories granted. The process exits with the
module's status; a trap prints wasmtime's message on stderr and exits 134, the status the
wasmtime command gives a trap.
"""

from __future__ import annotations

import os
import sys

TRAP_STATUS = 134


class Exited(Exception):
    """The module called ``proc_exit``: its status, whatever the number."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _proc_exit(status: int) -> None:
    raise Exited(status)


def _config():
    """wasmtime's configuration. Under an address-space limit (a notebook's `--memory`, the
    kernel's default 4 GiB) the default reservation of 4 GiB plus guard pages per linear memory
    cannot be mapped at all, so the memory is reserved small and grows by moving, with explicit
    bounds checks instead of guard pages; without a limit, wasmtime's defaults."""
    import resource

    import wasmtime

    config = wasmtime.Config()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        config.memory_reservation = 64 << 20
        config.memory_reservation_for_growth = 64 << 20
        config.memory_guard_size = 64 << 10
        config.memory_may_move = True
    return config


def site_of(trap) -> int | None:
    """The trap site number (compiler/trapsites.py) of a trap in a `cancho.trap.N` function:
    the innermost frame of the backtrace wasmtime gives with the trap."""
    frames = trap.frames or []
    name = frames[0].func_name if frames else None
    if not name or not name.startswith("cancho.trap."):
        return None
    digits = name[len("cancho.trap."):]
    return int(digits) if digits.isdigit() else None


def report_site(trap, fd: int) -> None:
    """Write the site number, in decimal, to the descriptor the parent gave (``--trap-fd``)."""
    number = site_of(trap)
    if number is not None:
        try:
            os.write(fd, str(number).encode())
        except OSError:
            pass


def run(module_path: str, argv: list[str], dirs: list[str] = (), trap_fd: int | None = None) -> int:
    """The module's exit status (its ``proc_exit`` code, 0 when ``_start`` returns).

    wasmtime's own ``proc_exit`` refuses a status of 126 or more (an error, not an exit), yet a
    cancho program's status is any byte, as natively; so ``proc_exit`` is ours: it ends the
    run with the status the program gave."""
    import wasmtime

    engine = wasmtime.Engine(_config())
    module = wasmtime.Module.from_file(engine, module_path)
    store = wasmtime.Store(engine)
    config = wasmtime.WasiConfig()
    config.argv = argv
    config.inherit_stdin()
    config.inherit_stdout()
    config.inherit_stderr()
    for grant in dirs:  # HOST[::GUEST], the guest name defaulting to the host's
        host, _, guest = grant.partition("::")
        config.preopen_dir(host, guest or host)
    store.set_wasi(config)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    linker.allow_shadowing = True
    linker.define_func("wasi_snapshot_preview1", "proc_exit",
                       wasmtime.FuncType([wasmtime.ValType.i32()], []), _proc_exit)
    instance = linker.instantiate(store, module)
    start = instance.exports(store)["_start"]
    try:
        start(store)
    except Exited as exit_:
        return exit_.status & 0xFF
    except wasmtime.ExitTrap as exit_:
        return exit_.code & 0xFF
    except wasmtime.Trap as trap:
        code = trap.trap_code
        what = code.name.lower().replace("_", " ") if code is not None else "trap"
        sys.stderr.write(f"cancho: the program trapped (wasm: {what})\n")
        if trap_fd is not None:
            report_site(trap, trap_fd)
        return TRAP_STATUS
    return 0


def main(args: list[str]) -> int:
    dirs: list[str] = []
    trap_fd = None
    while args and args[0].startswith(("--dir=", "--trap-fd=")):  # ours first; the program's after
        if args[0].startswith("--trap-fd="):
            trap_fd = int(args[0][len("--trap-fd="):])
        else:
            dirs.append(args[0][len("--dir="):])
        args = args[1:]
    if len(args) < 2:
        sys.stderr.write("usage: wasi_runner [--dir=HOST[::GUEST]]... MODULE ARGV0 [ARG...]\n")
        return 2
    return run(args[0], args[1:], dirs, trap_fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
