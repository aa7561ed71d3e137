"""The Jupyter kernel: messages in, cells through the session and runner, messages out.

Everything a cell publishes (``stream``, ``display_data``, ``execute_result``, ``error``) is sent
from ``do_execute`` itself, parented to the execute request, so it all precedes ``idle``
(kernel.md §3.2). ``KeyboardInterrupt`` never escapes ``do_execute`` (§3.5): an interrupt during
a run cancels it (the program's process group is killed) and the cell reports an ``error``
named ``KeyboardInterrupt``; the session's items are kept.

Safe mode (``CanchoKernel.safe_mode = True`` in the Jupyter config, or ``CANCHO_SAFE=1`` in the
kernel's environment) is fixed when the kernel starts: see :mod:`directives` and README. In safe
mode every program runs in the sandbox with the notebook's directory its only writable place
(compiler/policy.py, sandbox.py; Landlock inside, confine.py); where the sandbox or Landlock is
missing the kernel logs it and says so in the first cell's output.

Nothing outlives the kernel: runs are supervised by the exe launcher or the JIT worker, which
kill every descendant of a run when it ends and when the kernel goes (the launcher dies with
the thread that started it, the worker at end of file on its socket). SIGTERM and SIGHUP stop
the worker and remove the kernel's temporary directories before the kernel dies by the same
signal; directories a SIGKILLed kernel left are removed when the next kernel starts.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ipykernel.kernelbase import Kernel
from ipykernel._version import kernel_protocol_version
from traitlets import Bool

from .. import __version__

if TYPE_CHECKING:
    from . import presentation as P
    from .directives import Settings
    from .runner import Runner
    from .session import Session

# What a kernel imports at start is ipykernel's (~0.5 s, IPython with it); the compiler, the
# session, the runner, the directives and completion (~0.15 s more, llvmlite among them) are
# imported by the warm-up once the kernel is ready, or by the first request needing them.

# The comm targets ipywidgets registers (its widget and its control protocol).
WIDGET_TARGETS = ("jupyter.widget", "jupyter.widget.control")
WARM_UP_AFTER = 2.0  # seconds after start: the warm-up's latest start when no kernel_info came
WARM_UP_DELAY = 0.25  # seconds after the first kernel_info reply: the warm-up's start
LARGE_CELL = 1 << 20  # characters: a cell this large is not kept in the history, and its memory is trimmed
HISTORY_BYTES = 16 << 20  # characters of cells and results the history keeps in all

LANGUAGE_INFO = {
    "name": "cancho",
    "version": "1",
    "mimetype": "text/x-cancho",
    "file_extension": ".cho",
    "pygments_lexer": "cancho",
    "codemirror_mode": "cancho",
    "nbconvert_exporter": "script",
}


class CellContext:
    """One cell's way to publish (see :class:`directives.Context`)."""

    def __init__(self, kernel: "CanchoKernel", silent: bool, allow_stdin: bool = False) -> None:
        self.kernel = kernel
        self.silent = silent
        self.allow_stdin = allow_stdin
        self.session = kernel.cancho_session
        self.runner = kernel.runner
        self.settings = kernel.settings
        self.failed = False
        self.failure: P.Failure | None = None
        self.payload: list[dict] = []
        self.result_text: str | None = None

    def _send(self, msg_type: str, content: dict) -> None:
        if not self.silent:
            self.kernel.send_response(self.kernel.iopub_socket, msg_type, content)

    def stream(self, name: str, text: str) -> None:
        self._send("stream", {"name": name, "text": text})

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        transient = {"display_id": display_id} if display_id else {}
        self._send("display_data", {"data": data, "metadata": metadata or {}, "transient": transient})

    def update(self, data: dict, metadata: dict | None = None, *, display_id: str) -> None:
        """Replace a display published with ``display_id`` (also after the cell has ended)."""
        self._send("update_display_data", {"data": data, "metadata": metadata or {},
                                           "transient": {"display_id": display_id}})

    def result(self, data: dict, metadata: dict | None = None) -> None:
        self.result_text = data.get("text/plain")
        self._send("execute_result", {"execution_count": self.kernel.execution_count, "data": data,
                                      "metadata": metadata or {}})

    def fail(self, failure: P.Failure) -> None:
        if self.failed:
            return
        self.failed, self.failure = True, failure
        self._send("error", {"ename": failure.ename, "evalue": failure.evalue, "traceback": failure.traceback})

    def page(self, text: str) -> None:
        self.payload.append({"source": "page", "data": {"text/plain": text}, "start": 0})

    def clear(self) -> None:
        self._send("clear_output", {"wait": False})

    def live_view(self, stdin_given: bool) -> "CellView | None":
        """Where a run of this cell is shown while it runs (None when the cell is silent); its
        stdin is the user's when the frontend allows input and the cell gave none."""
        if self.silent:
            return None
        return CellView(self, interactive=self.allow_stdin and not stdin_given)


# What ends a program's input (README, %help): an empty submission, or a line holding only
# Ctrl-D as the character itself or as `^D`.
END_OF_INPUT = ("", "\x04", "^D")


class CellView:
    """A run shown in its cell (streaming.LiveView): output as ``stream`` messages, a read of
    an empty stdin as an ``input_request`` on the stdin channel (what ``raw_input`` does in
    ipykernel, but giving up when the run ends meanwhile)."""

    def __init__(self, ctx: CellContext, interactive: bool) -> None:
        self.ctx, self.interactive = ctx, interactive

    def show(self, stream: str, text: str) -> None:
        self.ctx.stream(stream, text)

    def ask(self, over) -> bytes | None:
        kernel = self.ctx.kernel
        value = _input_request(kernel, over)
        if value is None or value in END_OF_INPUT:
            return None
        return (value + "\n").encode("utf-8", errors="surrogateescape")


def _input_request(kernel: "CanchoKernel", over) -> str | None:
    """Send an ``input_request`` to the frontend of the current execute request and wait for
    its reply (None when ``over()`` becomes true first). KeyboardInterrupt passes through."""
    import zmq
    from ipykernel.jsonutil import json_clean

    sock = kernel.stdin_socket
    while True:  # replies to an earlier, abandoned request
        try:
            sock.recv_multipart(zmq.NOBLOCK)
        except zmq.ZMQError:
            break
    parent = kernel.get_parent("shell")
    ident = kernel._parent_ident["shell"]  # as raw_input addresses it (ipykernel 6 and 7)
    kernel.session.send(sock, "input_request", json_clean({"prompt": "", "password": False}),
                        parent, ident=ident)
    while not over():
        if not sock.poll(50):
            continue
        _ident, reply = kernel.session.recv(sock)
        if reply is not None:
            try:
                return str(reply["content"]["value"])
            except (KeyError, TypeError):
                return ""
    return None


@dataclass
class CellMachinery:
    """What cells need, built once on first use (see the import note above): the session, the
    settings fixed at start (safe mode, the notebook's directory) and the runner."""

    session: "Session"
    settings: "Settings"
    runner: "Runner"


class CanchoKernel(Kernel):
    implementation = "cancho_kernel"
    implementation_version = __version__
    language = "cancho"
    language_version = "1"
    language_info = LANGUAGE_INFO
    banner = (f"cancho kernel {__version__}: cells are cancho programs (editions 1-8); "
              "items persist, a cell with `main` runs. %help lists the directives.")
    help_links = [{"text": "cancho-kernel", "url": "https://github.com/alpibrusl/cancho"}]

    safe_mode = Bool(False, help="Safe mode for shared (teaching) servers: refuse programs that reach "
                                 "foreign code, %%c and C flags, paths outside the notebook's directory, "
                                 "and run limits above the caps. CANCHO_SAFE=1 turns it on too.").tag(config=True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._root = Path.cwd().resolve()
        self._machinery: CellMachinery | None = None
        self._machinery_lock = threading.Lock()
        self._warm_started = False
        # The JIT worker is a process of its own: started now, its start (~0.3 s of LLVM set-up)
        # overlaps the kernel's, and it is ready when the first cell runs.
        from ..compiler.backends.jit import JitWorker

        self._jit_worker = JitWorker()
        from ..compiler.policy import safe_from_env

        if not (self.safe_mode or safe_from_env()):  # safe: the warm-up starts it in the sandbox
            threading.Thread(target=self._start_worker, name="cancho-jit-start", daemon=True).start()
        # The warm-up (JIT worker, compiler, common std modules) starts once the kernel has
        # answered its first kernel_info request — the frontend's "ready" — so that it does not
        # compete for the GIL and the CPU with the start itself; WARM_UP_AFTER seconds at the
        # latest, or at the first request that needs it.
        self._warm_timer = threading.Timer(WARM_UP_AFTER, self._warm_up)
        self._warm_timer.daemon = True
        self._warm_timer.start()
        self._history: list[tuple[int, int, str, str | None]] = []
        self._history_chars = 0
        from .memory import bound_allocator

        bound_allocator()
        self._setup_comms()
        self._install_exit_cleanup()

    def _start_worker(self) -> None:
        try:
            self._jit_worker.start()
        except Exception:  # reported by the first run that needs it
            pass

    def machinery(self) -> CellMachinery:
        """The session, settings and runner, built on first use (by the warm-up thread or the
        first request that needs them, whichever comes first; the other waits)."""
        with self._machinery_lock:
            if self._machinery is None:
                from ..compiler import policy
                from ..compiler.backends.process import remove_stale_dirs
                from .directives import Settings
                from .runner import Runner
                from .session import Session

                safe = bool(self.safe_mode) or policy.safe_from_env()
                remove_stale_dirs()  # what a kernel killed by SIGKILL left behind
                settings = Settings(safe=safe, root=self._root)
                plan = policy.plan_for(settings.root) if safe else None
                if plan is not None and plan.warning:
                    (self.log or logging.getLogger(__name__)).warning("%s", plan.warning.strip())
                runner = Runner(caps=plan.caps() if plan else None,
                                notice=plan.warning if plan else None, worker=self._jit_worker)
                self._machinery = CellMachinery(Session(safe=safe), settings, runner)
            return self._machinery

    @property
    def cancho_session(self) -> "Session":
        return self.machinery().session

    @property
    def settings(self) -> "Settings":
        return self.machinery().settings

    @property
    def runner(self) -> "Runner":
        return self.machinery().runner

    def _warm_up(self) -> None:
        """Build the machinery and start the runner's warm-up, in the background (once; later
        calls do nothing)."""
        self._warm_timer.cancel()
        with self._machinery_lock:
            if self._warm_started:
                return
            self._warm_started = True

        def warm() -> None:
            m = self.machinery()
            m.runner.warm_up(m.session.module_cache)

        threading.Thread(target=warm, name="cancho-warm-up", daemon=True).start()

    async def kernel_info_request(self, stream, ident, parent):
        await super().kernel_info_request(stream, ident, parent)
        # A moment later, so that this request's `idle` is published before the warm-up's
        # imports compete for the GIL (a client reading status messages in order expects it).
        asyncio.get_running_loop().call_later(WARM_UP_DELAY, self._warm_up)

    @property
    def kernel_info(self):
        # Not super().kernel_info: that imports debugpy (slow, and it prints warnings into
        # terminals) to advertise ipykernel's debugger, which this kernel does not have.
        return {
            "protocol_version": kernel_protocol_version,
            "implementation": self.implementation,
            "implementation_version": self.implementation_version,
            "language_info": self.language_info,
            "banner": self.banner,
            "help_links": self.help_links,
            "supported_features": ["kernel subshells"] if self._supports_kernel_subshells else [],
        }

    # -- comms (ipywidgets, kernel.md §3.9) ----------------------------------------------------

    def _setup_comms(self) -> None:
        try:
            import comm
            from ipykernel.comm.comm import BaseComm
            from ipykernel.comm.manager import CommManager
        except Exception:  # comms are optional; the kernel works without them
            return
        if getattr(comm.get_comm_manager, "__module__", "").startswith("comm"):
            # Not patched by ipykernel.ipkernel (which this kernel does not import): do what it does.
            manager = CommManager(kernel=self)
            comm.create_comm = lambda *a, **kw: BaseComm(*a, **kw)
            comm.get_comm_manager = lambda *a, **kw: manager
        self.comm_manager = comm.get_comm_manager()
        for msg_type in ("comm_open", "comm_msg", "comm_close"):
            self.shell_handlers[msg_type] = getattr(self.comm_manager, msg_type)
        # ipywidgets (~35 ms and a few MiB) is imported when a frontend first opens one of its
        # comms, or when %%bench --interactive makes widgets, not at every kernel start.
        for target in WIDGET_TARGETS:
            self.comm_manager.register_target(target, self._widget_comm_opened)

    def _widget_comm_opened(self, comm, msg) -> None:
        """The first comm to an ipywidgets target: import ipywidgets, which registers its own
        handlers in place of this one, and hand the comm to it."""
        target = msg["content"]["target_name"]
        try:
            import ipywidgets
            ipywidgets.register_comm_target()
        except Exception:  # no ipywidgets: the frontend's widget manager gets no answer
            return
        handler = self.comm_manager.targets.get(target)
        if handler is not None and handler != self._widget_comm_opened:
            handler(comm, msg)

    # -- every request gets a reply (requests.py) -------------------------------------------------

    def _reply(self, stream, ident, parent, msg_type: str, content: dict) -> None:
        from ipykernel.jsonutil import json_clean

        self.session.send(stream, msg_type.replace("_request", "_reply"), json_clean(content), parent,
                          ident=ident)

    def _refuse(self, stream, ident, parent, msg_type: str, message: str) -> None:
        from . import requests

        self.log.warning("%s refused: %s", msg_type, message)
        content = requests.error_reply(msg_type, message)
        if msg_type == "execute_request":
            content["execution_count"] = self.execution_count
        self._reply(stream, ident, parent, msg_type, content)

    def _bad(self, stream, ident, parent, msg_type: str) -> bool:
        """Answer a request whose content its handler cannot take with an error reply; whether
        it was answered so."""
        from . import requests

        if not isinstance(parent.get("metadata"), dict):
            parent["metadata"] = {}  # ipykernel reads the cell id from it, and gives up without
        message = requests.problem(msg_type, parent.get("content"))
        if message is None:
            return False
        self._refuse(stream, ident, parent, msg_type, message)
        return True

    async def _answer(self, stream, ident, parent, msg_type: str, handler) -> None:
        """Check the request, run ``handler(content)`` and reply with what it returns; a
        failure of ours is an error reply too, never silence."""
        if not self.session or self._bad(stream, ident, parent, msg_type):
            return
        try:
            content = await handler(parent["content"])
        except Exception as e:
            self.log.error("%s failed", msg_type, exc_info=True)
            self._refuse(stream, ident, parent, msg_type, f"the kernel failed: {type(e).__name__}: {e}")
            return
        self._reply(stream, ident, parent, msg_type, content)

    async def execute_request(self, stream, ident, parent):
        if self.session and not self._bad(stream, ident, parent, "execute_request"):
            await super().execute_request(stream, ident, parent)
            if len(parent["content"]["code"]) > LARGE_CELL:
                from .memory import release_memory

                release_memory()  # what the cell's check held, back to the system

    async def complete_request(self, stream, ident, parent):
        await self._answer(stream, ident, parent, "complete_request",
                           lambda c: self.do_complete(c["code"], c["cursor_pos"]))

    async def inspect_request(self, stream, ident, parent):
        await self._answer(stream, ident, parent, "inspect_request",
                           lambda c: self.do_inspect(c["code"], c["cursor_pos"], c.get("detail_level", 0),
                                                     set(c.get("omit_sections", []))))

    async def is_complete_request(self, stream, ident, parent):
        await self._answer(stream, ident, parent, "is_complete_request", lambda c: self.do_is_complete(c["code"]))

    async def history_request(self, stream, ident, parent):
        from . import requests

        def history(c: dict):
            kw = {"output": False, "raw": True, **requests.known_fields("history_request", c)}
            return self.do_history(**kw)
        await self._answer(stream, ident, parent, "history_request", history)

    # -- execute ---------------------------------------------------------------------------------

    async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                         allow_stdin=False, *, cell_meta=None, cell_id=None):
        from . import directives
        from . import presentation as P

        self._warm_up()  # a frontend that never asked for kernel_info
        ctx = CellContext(self, silent, allow_stdin=bool(allow_stdin))
        t0 = time.perf_counter()
        if not silent and (notice := self.runner.take_notice()):
            ctx.stream("stderr", notice)
        try:
            directives.execute(ctx, code, f"cell[{self.execution_count}]")
        except KeyboardInterrupt:
            ctx.fail(P.simple_failure("KeyboardInterrupt", "interrupted; the session is kept"))
        except Exception as e:  # a bug of ours: report it in the cell, keep the kernel
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            ctx.fail(P.Failure("internal", f"the kernel failed: {type(e).__name__}: {e}",
                               [line.rstrip("\n") for chunk in tb for line in chunk.split("\n")]))
        self.log.debug("cell handled in %.1f ms", (time.perf_counter() - t0) * 1000)
        if store_history and not silent:
            self._remember(code, ctx.result_text)
        if ctx.failed:
            f = ctx.failure
            assert f is not None
            return {"status": "error", "execution_count": self.execution_count, "ename": f.ename,
                    "evalue": f.evalue, "traceback": f.traceback}
        return {"status": "ok", "execution_count": self.execution_count, "payload": ctx.payload,
                "user_expressions": {}}

    # -- completion, inspection, is_complete -----------------------------------------------------

    async def do_complete(self, code, cursor_pos):
        from . import completion

        return completion.complete(code, len(code) if cursor_pos is None else cursor_pos, self.cancho_session)

    async def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        from . import completion

        return completion.inspect(code, len(code) if cursor_pos is None else cursor_pos, self.cancho_session)

    async def do_is_complete(self, code):
        from . import completion

        return completion.is_complete(code)

    # -- history ---------------------------------------------------------------------------------

    def _remember(self, code: str, result: str | None) -> None:
        """Keep a cell for history requests, within :data:`HISTORY_BYTES` (oldest dropped
        first); a cell larger than :data:`LARGE_CELL` is not kept (its text would stay in the
        kernel's memory for as long as it runs)."""
        if len(code) > LARGE_CELL:
            return
        self._history.append((1, self.execution_count, code, result))
        self._history_chars += len(code) + len(result or "")
        while self._history_chars > HISTORY_BYTES and self._history:
            _, _, old, out = self._history.pop(0)
            self._history_chars -= len(old) + len(out or "")

    async def do_history(self, hist_access_type, output, raw, session=None, start=None, stop=None,
                         n=None, pattern=None, unique=False):
        entries = list(self._history)
        if hist_access_type == "tail":
            entries = entries[-n:] if n else entries
        elif hist_access_type == "range":
            start = start or 0
            stop = stop if stop is not None else sys.maxsize
            entries = [e for e in entries if (not session or session <= 0 or e[0] == session)
                       and start <= e[1] < stop]
        elif hist_access_type == "search":
            pat = pattern or "*"
            entries = [e for e in entries if fnmatch.fnmatchcase(e[2], pat)]
            if unique:
                seen: set[str] = set()
                kept = []
                for e in reversed(entries):
                    if e[2] not in seen:
                        seen.add(e[2])
                        kept.append(e)
                entries = list(reversed(kept))
            if n:
                entries = entries[-n:]
        else:
            entries = []
        history = [(s, line, (code, out) if output else code) for s, line, code, out in entries]
        return {"status": "ok", "history": history}

    # -- shutdown --------------------------------------------------------------------------------

    async def do_shutdown(self, restart):
        m = self._machinery
        if m is not None:
            m.runner.close()
            m.session.programs.close()
        else:
            self._jit_worker.close()
        return {"status": "ok", "restart": restart}

    def _install_exit_cleanup(self) -> None:
        """SIGTERM/SIGHUP: stop the worker (it kills its run and sweeps) and remove the temporary
        directories, then die by the same signal. Only the main thread may install handlers."""
        def on_signal(signum: int, frame) -> None:
            for s in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(s, signal.SIG_IGN)
            try:
                self._jit_worker.abandon()
                m = self._machinery
                if m is not None:
                    from ..compiler.backends.process import remove_stale_dirs

                    m.session.programs.close()
                    remove_stale_dirs(owner=os.getpid())  # a run's directory still in use
            finally:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        try:
            for s in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(s, on_signal)
        except ValueError:  # not the main thread (an embedding test): nothing to install
            pass
