"""Driving a real cancho kernel through jupyter_client, shared by the kernel test modules: start
one kernel per module, execute a cell and keep every output message it published."""

from __future__ import annotations

from jupyter_client.manager import start_new_kernel

HELLO = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {
        write_bytes(i, "hello, world\\n");
    }
    release(io);
    return 0;
}
"""

# A program that never ends (the stop button's and the timeout's test case).
LOOP = """fn main(world: World) -> [] int {
    release(world);
    var n = 0;
    while true {
        n = n + 0;
    }
    return n;
}
"""


def started_kernel():
    """A generator for a module-scoped fixture: (manager, client), shut down afterwards."""
    km, kc = start_new_kernel(kernel_name="cancho", startup_timeout=60)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class Cell:
    """One executed cell: its reply and the output messages published for it."""

    def __init__(self, reply: dict, outputs: list[dict]) -> None:
        self.reply, self.outputs = reply, outputs

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    def of(self, msg_type: str) -> list[dict]:
        return [m["content"] for m in self.outputs if m["msg_type"] == msg_type]

    def stream(self, name: str) -> str:
        return "".join(c["text"] for c in self.of("stream") if c["name"] == name)

    @property
    def error(self) -> dict | None:
        errs = self.of("error")
        return errs[0] if errs else None

    def plains(self) -> list[str]:
        return [c["data"].get("text/plain", "") for c in self.of("display_data") + self.of("execute_result")]

    @property
    def shown(self) -> str:
        return "\n".join(c["data"].get("text/plain", "") for c in self.of("display_data"))


def run(kernel, code: str, timeout: float = 60, cell: type = Cell) -> Cell:
    """Execute `code` and wait for the reply, keeping every output message (as `cell`). The
    frontend does not accept input requests (as nbconvert and nbval): a program reading stdin
    gets end of file."""
    _, kc = kernel
    outputs: list[dict] = []

    def hook(msg: dict) -> None:
        if msg["msg_type"] not in ("status", "execute_input"):
            outputs.append(msg)

    reply = kc.execute_interactive(code, output_hook=hook, timeout=timeout, allow_stdin=False)
    return cell(reply, outputs)


def assert_alive(kernel) -> None:
    """The kernel still answers a hello cell."""
    cell = run(kernel, HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"
