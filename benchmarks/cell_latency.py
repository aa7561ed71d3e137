"""Cell latency: what a notebook user waits for, through a real kernel, and where it goes.

``python -m benchmarks.cell_latency [--quick] [--starts N] [--runs N] [--json PATH]``

Sections (each reports medians with min–max; baselines are measured in the same run; nothing is
ever compared with a threshold):

* **kernel** — ``starts`` kernels are started with jupyter_client from a temporary kernelspec
  (nothing installed), as a notebook starts them. In each: start to ready; the idle kernel's and
  its JIT worker's memory (RSS and PSS from ``/proc``; PSS splits the LLVM library the two
  share); a hello cell per backend (``%%run --backend B``, the first cell of the session apart);
  a cell importing ``std.io``, ``std.fmt`` and ``std.vec`` — first, re-run unchanged, and re-run
  after editing one function (a constant changes each time); and an empty ``main`` timed by
  ``%%bench --backend both`` as a user would (the program's wall time per backend).
* **empty-main** — in this process, interleaved: an empty ``main`` on the JIT worker (C child and
  the Python fallback child) and as an executable, against C (``cc -O2`` of
  ``int main(void){return 0;}``) started the same way: each run's wall time as ``%%bench``
  reports it, and the caller's round trip.
* **profile** — the std cell's source compiled step by step in a warm process: parse, check,
  lower, O2, MCJIT, and its run on the JIT worker.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kernel_roundtrip import HELLO
from .stats import summarize

REPO = Path(__file__).resolve().parent.parent

EMPTY_MAIN = """fn main(world: World) -> [] int {
    release(world);
    return 0;
}
"""

# The std-importing cell: `{k}` is the constant the "edit" runs change (the body of `scale`).
STD_CELL = """import std.io;
import std.fmt;
import std.vec;

fn scale(n: int) -> [] int {{
    return n * {k};
}}

fn sum_of[&h](heap: &!h Heap, count: int) -> [heap] int {{
    var v = vec.empty(heap, 0, 0);
    var k = 0;
    while k < count {{
        v = vec.push(heap, v, scale(k));
        k = k + 1;
    }}
    var total = 0;
    borrow v as &r in {{
        k = 0;
        while k < vec.size(r) {{
            total = total + vec.get(r, k);
            k = k + 1;
        }}
    }}
    vec.drop(heap, v);
    return total;
}}

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi);
    release(fs);
    release(args);
    var total = 0;
    borrow mut heap as &!h in {{
        total = sum_of(h, 10);
    }}
    release(heap);
    borrow mut io as &!i in {{
        region line {{
            let out = alloc_slice[line](32, byte_of(0));
            var at = fmt.put(out, 0, "sum ");
            at = fmt.put_int(out, at, total);
            at = fmt.put(out, at, "\\n");
            io.write_all(i, out[0..at]);
        }}
    }}
    release(io);
    return 0;
}}
"""


def std_cell(k: int) -> str:
    """The std cell with ``scale`` multiplying by ``k``."""
    return STD_CELL.format(k=k)


def std_expected(k: int) -> str:
    """What the std cell prints: the sum of ``k * i`` for i in 0..9."""
    return f"sum {k * 45}\n"


def summary_ms(xs: list[float]) -> dict[str, float | int]:
    return summarize(xs).to_json()


# -- memory of a process ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Resident and proportional set size of one process, KiB (PSS shares pages fairly)."""

    rss_kib: int
    pss_kib: int

    def to_json(self) -> dict[str, int]:
        return {"rss_kib": self.rss_kib, "pss_kib": self.pss_kib}


def memory_of(pid: int) -> Memory | None:
    """RSS and PSS from ``/proc/PID/smaps_rollup``; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = dict(re.findall(r"^(Rss|Pss):\s+(\d+) kB", text, re.M))
    return Memory(int(values.get("Rss", 0)), int(values.get("Pss", 0)))


def children_of(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            kids += [int(w) for w in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    except OSError:
        pass
    return kids


# -- a kernel driven like a notebook --------------------------------------------------------------------


@dataclass
class CellReply:
    ms: float
    status: str
    stdout: str
    metadata: list[dict]


class KernelSession:
    """One kernel started from a temporary kernelspec (nothing installed) and its client."""

    def __init__(self, km: Any, kc: Any, ready_ms: float) -> None:
        self.km, self.kc, self.ready_ms = km, kc, ready_ms

    @property
    def pid(self) -> int | None:
        proc = getattr(getattr(self.km, "provisioner", None), "process", None)
        return getattr(proc, "pid", None)

    def cell(self, code: str, timeout: float = 120) -> CellReply:
        out: list[str] = []
        meta: list[dict] = []

        def hook(msg: dict) -> None:
            kind = msg["msg_type"]
            if kind == "stream" and msg["content"].get("name") == "stdout":
                out.append(msg["content"]["text"])
            elif kind in ("display_data", "execute_result", "update_display_data"):
                meta.append(msg["content"].get("metadata") or {})

        start = time.perf_counter()
        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        ms = (time.perf_counter() - start) * 1e3
        return CellReply(ms, reply["content"]["status"], "".join(out), meta)

    def checked(self, code: str, expect: str) -> float:
        """Run a cell that must succeed and print ``expect``; its round trip, ms."""
        r = self.cell(code)
        if r.status != "ok" or r.stdout != expect:
            raise RuntimeError(f"cell failed ({r.status}), printed {r.stdout!r}; expected {expect!r}")
        return r.ms


@contextmanager
def kernel_session(startup_timeout: float = 60) -> Iterator[KernelSession]:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    with tempfile.TemporaryDirectory(prefix="cancho-kspec-") as tmp:
        spec_dir = Path(tmp) / "kernels" / "cancho-bench"
        spec_dir.mkdir(parents=True)
        pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "cancho_kernel", "-f", "{connection_file}"],
            "display_name": "cancho (bench)", "language": "cancho", "interrupt_mode": "signal",
            "env": {"PYTHONPATH": pythonpath}}))
        ksm = KernelSpecManager(kernel_dirs=[str(Path(tmp) / "kernels")])
        km = KernelManager(kernel_name="cancho-bench", kernel_spec_manager=ksm)
        start = time.perf_counter()
        km.start_kernel()
        kc = km.client()
        try:
            kc.start_channels()
            kc.wait_for_ready(timeout=startup_timeout)
            session = KernelSession(km, kc, (time.perf_counter() - start) * 1e3)
            yield session
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def _bench_walls(metadata: list[dict]) -> dict[str, list[float]]:
    """The per-backend wall samples of a ``%%bench`` document found in display metadata."""
    found: dict[str, list[float]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            items = node.get("items")
            if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
                for it in items:
                    samples = (it.get("samples") or {}).get("wall_ms")
                    if it.get("backend") and isinstance(samples, list):
                        found[str(it["backend"])] = [float(x) for x in samples]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(metadata)
    return found


def _idle_memory(session: KernelSession, settle: float = 1.0) -> dict[str, Any]:
    """The kernel's and its children's (the JIT worker's) memory once start-up work settled."""
    time.sleep(settle)
    pid = session.pid
    if pid is None:
        return {"status": "unavailable", "reason": "the kernel's pid is not known"}
    kernel = memory_of(pid)
    kids = [(k, memory_of(k)) for k in children_of(pid)]
    kids = [(k, m) for k, m in kids if m is not None]
    doc: dict[str, Any] = {"status": "ok", "kernel": kernel.to_json() if kernel else None,
                           "children": [m.to_json() for _, m in kids]}
    total = [m for m in [kernel, *[m for _, m in kids]] if m is not None]
    doc["total"] = {"rss_kib": sum(m.rss_kib for m in total), "pss_kib": sum(m.pss_kib for m in total)}
    return doc


def measure_kernels(starts: int, runs: int) -> dict[str, Any]:
    """The kernel section (see the module docstring)."""
    try:
        import jupyter_client  # noqa: F401
    except ImportError as exc:
        return {"status": "unavailable", "reason": f"jupyter_client not importable: {exc}"}
    ready: list[float] = []
    first_cell: list[float] = []
    hello: dict[str, list[float]] = {"jit": [], "exe": []}
    std_first: list[float] = []
    std_same: list[float] = []
    std_edit: list[float] = []
    bench: dict[str, list[float]] = {}
    memory: list[dict[str, Any]] = []
    hello_out = "hello, world\n"
    k = 3
    try:
        for _ in range(starts):
            with kernel_session() as s:
                ready.append(s.ready_ms)
                memory.append({"idle": _idle_memory(s)})
                first_cell.append(s.checked(f"%%run --backend jit\n{HELLO}", hello_out))
                for _ in range(runs):
                    for backend in ("jit", "exe"):
                        hello[backend].append(s.checked(f"%%run --backend {backend}\n{HELLO}", hello_out))
                std_first.append(s.checked(f"%%run --backend jit\n{std_cell(k)}", std_expected(k)))
                for _ in range(runs):
                    std_same.append(s.checked(f"%%run --backend jit\n{std_cell(k)}", std_expected(k)))
                for _ in range(runs):
                    k += 1
                    std_edit.append(s.checked(f"%%run --backend jit\n{std_cell(k)}", std_expected(k)))
                r = s.cell(f"%%bench --backend both --runs {max(runs, 5)}\n{EMPTY_MAIN}")
                if r.status != "ok":
                    raise RuntimeError(f"the %%bench cell failed: {r.status}")
                for backend, xs in _bench_walls(r.metadata).items():
                    bench.setdefault(backend, []).extend(xs)
                memory[-1]["after"] = _idle_memory(s, settle=0.2)
    except Exception as exc:  # noqa: BLE001 - a failed section is reported, never fatal
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
    doc: dict[str, Any] = {
        "status": "ok", "starts": starts, "runs": runs,
        "ready_ms": summary_ms(ready), "first_cell_ms": summary_ms(first_cell),
        "hello_ms": {b: summary_ms(v) for b, v in hello.items()},
        "std_ms": {"first": summary_ms(std_first), "unchanged": summary_ms(std_same),
                   "edited": summary_ms(std_edit)},
        "bench_empty_main_wall_ms": {b: summary_ms(v) for b, v in bench.items() if v},
        "memory": memory,
    }
    hello_jit = statistics.median(hello["jit"])
    doc["std_over_hello"] = {name: statistics.median(xs) / hello_jit
                             for name, xs in (("first", std_first), ("unchanged", std_same),
                                              ("edited", std_edit))}
    return doc


# -- empty main in this process -------------------------------------------------------------------------


def _compile_ir(source: str) -> str:
    from cancho_kernel.compiler import api
    from cancho_kernel.compiler.source import SourceFile

    result = api.compile_sources([SourceFile("bench.cho", source)])
    if not result.ok or result.ir is None:
        raise RuntimeError(f"the benchmark program does not compile: {result.diagnostics}")
    return result.ir


def measure_empty_main(runs: int, cc: str = "cc") -> dict[str, Any]:
    """The empty-main section: interleaved runs, each variant's wall (as ``%%bench`` reports it:
    the program's process from start to reaped) and the caller's round trip."""
    from cancho_kernel.compiler.backends import exe
    from cancho_kernel.compiler.backends.jit import JitWorker
    from cancho_kernel.compiler.backends.jit_worker import PYTHON_CHILD_ENV
    from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget, run_executable

    if shutil.which(cc) is None:
        return {"status": "unavailable", "reason": f"C compiler {cc!r} not found"}
    try:
        ir = _compile_ir(EMPTY_MAIN)
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "reason": str(exc)}
    target, limits = StdoutTarget.dev_null(), RunLimits(timeout=30)
    with tempfile.TemporaryDirectory(prefix="cancho-bench-empty-") as tmp:
        cancho_exe = Path(tmp) / "empty"
        exe.build_executable(ir, cancho_exe)
        c_src = Path(tmp) / "empty.c"
        c_src.write_text("int main(void) { return 0; }\n")
        c_exe = Path(tmp) / "empty-c"
        subprocess.run([cc, "-O2", "-o", str(c_exe), str(c_src)], check=True, capture_output=True)
        with JitWorker() as fast, JitWorker(env={PYTHON_CHILD_ENV: "1"}) as slow:
            variants: dict[str, Callable[[], Any]] = {
                "jit": lambda: fast.run(ir, ["main"], b"", target, limits),
                "jit (Python child)": lambda: slow.run(ir, ["main"], b"", target, limits),
                "exe": lambda: run_executable(cancho_exe, ["main"], b"", target, limits),
                "C (cc -O2)": lambda: run_executable(c_exe, ["main"], b"", target, limits),
            }
            wall: dict[str, list[float]] = {v: [] for v in variants}
            trip: dict[str, list[float]] = {v: [] for v in variants}
            rss: dict[str, list[float]] = {v: [] for v in variants}
            for rnd in range(runs + 1):  # round 0 warms up (compiles, starts the workers)
                for name, run in variants.items():
                    start = time.perf_counter()
                    result = run()
                    elapsed = (time.perf_counter() - start) * 1e3
                    if result.exit_status != 0:
                        return {"status": "failed", "reason": f"{name}: {result.describe()}"}
                    if rnd:
                        wall[name].append(result.wall_seconds * 1e3)
                        trip[name].append(elapsed)
                        rss[name].append(result.peak_rss_bytes / 1024)
            mem = memory_of(fast.pid) if fast.pid else None
            worker_memory = {"jit worker": mem.to_json() if mem else None}
            children = {"jit": fast.child, "jit (Python child)": slow.child}
    c_med = statistics.median(wall["C (cc -O2)"])
    return {
        "status": "ok", "runs": runs,
        "wall_ms": {v: summary_ms(xs) for v, xs in wall.items()},
        "round_trip_ms": {v: summary_ms(xs) for v, xs in trip.items()},
        "peak_rss_kib": {v: statistics.median(xs) for v, xs in rss.items()},
        "minus_c_ms": {v: statistics.median(xs) - c_med for v, xs in wall.items()},
        "worker_memory": worker_memory, "child": children,
    }


# -- where a std cell's time goes ------------------------------------------------------------------------


def profile_std_cell(runs: int) -> dict[str, Any]:
    """The profile section: each compilation step of the std cell's source, warm process."""
    import llvmlite.binding as llvm

    from cancho_kernel.compiler.backends import mcjit, native
    from cancho_kernel.compiler.backends.jit import JitWorker
    from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget
    from cancho_kernel.compiler.check.program import check_parsed, parse_all
    from cancho_kernel.compiler.codegen.lower import lower_program
    from cancho_kernel.compiler.parser import parse_file
    from cancho_kernel.compiler.source import SourceFile

    parse_cell: list[float] = []
    steps: dict[str, list[float]] = {k: [] for k in ("parse", "check", "lower", "O2", "MCJIT", "run")}
    source = SourceFile("cell.cho", std_cell(3))
    try:
        with JitWorker() as worker:
            for rnd in range(runs + 1):
                t = [time.perf_counter()]
                diags: list = []
                files = parse_all([source], diags)
                t.append(time.perf_counter())
                diags2, program = check_parsed(files, diags)
                if diags2 or program is None:
                    return {"status": "failed", "reason": f"the std cell does not check: {diags2}"}
                t.append(time.perf_counter())
                ir, lower_diags = lower_program(program)
                if lower_diags:
                    return {"status": "failed", "reason": f"lowering failed: {lower_diags}"}
                t.append(time.perf_counter())
                tm = native.target_machine(jit=True)
                mod = native.parse(ir)
                native.optimize(mod, tm)
                t.append(time.perf_counter())
                engine = llvm.create_mcjit_compiler(mod, tm)
                engine.finalize_object()
                t.append(time.perf_counter())
                result = worker.run(ir, ["main"], b"", StdoutTarget.dev_null(), RunLimits(timeout=30))
                if result.exit_status != 0:
                    return {"status": "failed", "reason": f"the std cell's run: {result.describe()}"}
                del engine
                cell_start = time.perf_counter()
                parse_file(source)
                cell_parse = (time.perf_counter() - cell_start) * 1e3
                if rnd:  # round 0 warms imports and the worker up
                    for (name, xs), a, b in zip(list(steps.items())[:5], t, t[1:]):
                        xs.append((b - a) * 1e3)
                    steps["run"].append(result.wall_seconds * 1e3)
                    parse_cell.append(cell_parse)
        _ = mcjit  # the worker compiles with mcjit.compile_ir: the same O2 + MCJIT steps
    except Exception as exc:  # noqa: BLE001
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
    total = sum(statistics.median(xs) for xs in steps.values())
    return {"status": "ok", "runs": runs, "ir_bytes": len(ir),
            "step_ms": {k: summary_ms(xs) for k, xs in steps.items()},
            "parse_cell_only_ms": summary_ms(parse_cell),
            "share": {k: statistics.median(xs) / total for k, xs in steps.items()}}


# -- report ---------------------------------------------------------------------------------------------


def _fmt(s: dict | None) -> str:
    if not s:
        return "-"
    return f"{s['median']:.1f} [{s['min']:.1f}–{s['max']:.1f}]"


def format_table(doc: dict[str, Any]) -> str:
    lines: list[str] = []
    k = doc.get("kernel", {})
    lines.append("== kernel (jupyter_client; ms, median [min–max]) ==")
    if k.get("status") != "ok":
        lines.append(f"  {k.get('status', 'skipped')}: {k.get('reason', '')}")
    else:
        lines.append(f"  start to ready            {_fmt(k['ready_ms'])}  ({k['starts']} starts)")
        lines.append(f"  first cell (hello, jit)   {_fmt(k['first_cell_ms'])}")
        for b, s in k["hello_ms"].items():
            lines.append(f"  hello cell, {b:<4}          {_fmt(s)}")
        for name, s in k["std_ms"].items():
            lines.append(f"  std cell, {name:<10}      {_fmt(s)}   {k['std_over_hello'][name]:.1f}x hello jit")
        for b, s in k["bench_empty_main_wall_ms"].items():
            lines.append(f"  %%bench empty main, {b:<4}  {_fmt(s)}  (program wall)")
        idle = [m["idle"] for m in k["memory"] if m.get("idle", {}).get("status") == "ok"]
        if idle:
            m = idle[-1]
            kern = m["kernel"] or {}
            kids = ", ".join(f"{c['rss_kib'] / 1024:.1f}/{c['pss_kib'] / 1024:.1f}" for c in m["children"])
            lines.append(f"  idle memory MiB rss/pss   kernel {kern.get('rss_kib', 0) / 1024:.1f}/"
                         f"{kern.get('pss_kib', 0) / 1024:.1f}; children {kids or '-'}; total "
                         f"{m['total']['rss_kib'] / 1024:.1f}/{m['total']['pss_kib'] / 1024:.1f}")
    e = doc.get("empty_main", {})
    lines.append("== empty main, this process (ms, median [min–max]) ==")
    if e.get("status") != "ok":
        lines.append(f"  {e.get('status', 'skipped')}: {e.get('reason', '')}")
    else:
        for v, s in e["wall_ms"].items():
            lines.append(f"  {v:<20} wall {_fmt(s):<22} round trip {_fmt(e['round_trip_ms'][v]):<22} "
                         f"{e['minus_c_ms'][v]:+.2f} vs C   peak RSS {e['peak_rss_kib'][v] / 1024:.1f} MiB")
    p = doc.get("profile", {})
    lines.append("== std cell, step by step (warm process; ms) ==")
    if p.get("status") != "ok":
        lines.append(f"  {p.get('status', 'skipped')}: {p.get('reason', '')}")
    else:
        for name, s in p["step_ms"].items():
            lines.append(f"  {name:<6} {_fmt(s):<24} {p['share'][name] * 100:5.1f}%")
        lines.append(f"  (parse of the cell alone {_fmt(p['parse_cell_only_ms'])}; the rest is the std "
                     f"modules it imports; {p['ir_bytes']} bytes of IR)")
    return "\n".join(lines)


def run(starts: int, runs: int, kernel: bool = True, cc: str = "cc") -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": "cancho-cell-latency/1"}
    doc["empty_main"] = measure_empty_main(max(runs * 3, 5), cc)
    doc["profile"] = profile_std_cell(runs)
    doc["kernel"] = measure_kernels(starts, runs) if kernel else {"status": "skipped", "reason": "--no-kernel"}
    return doc


def well_formed(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a result document (empty: every number is finite and non-negative,
    every section that ran says ok)."""
    problems: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")
        elif isinstance(node, float) and not (node == node and abs(node) != float("inf")):
            problems.append(f"{where} is not finite")
    walk(doc, "doc")
    for name in ("empty_main", "profile", "kernel"):
        section = doc.get(name)
        if section is not None and section.get("status") not in ("ok", "skipped", "unavailable"):
            problems.append(f"{name}: {section.get('status')}: {section.get('reason')}")
    for name, s in (doc.get("empty_main", {}).get("wall_ms") or {}).items():
        if not 0 < s["min"] <= s["median"] <= s["max"]:
            problems.append(f"empty_main.{name} is not ordered")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cell_latency",
                                description="Cell latency through a real kernel, the empty-main "
                                            "run cost per backend against C, and a std cell's "
                                            "compilation profile.")
    p.add_argument("--quick", action="store_true", help="1 kernel start, 3 runs")
    p.add_argument("--starts", type=int, default=None, help="kernels started (default 3)")
    p.add_argument("--runs", type=int, default=None, help="runs per cell and kernel (default 7)")
    p.add_argument("--no-kernel", action="store_true", help="skip the kernel section")
    p.add_argument("--cc", default="cc")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = p.parse_args(argv)
    starts = args.starts if args.starts is not None else (1 if args.quick else 3)
    runs = args.runs if args.runs is not None else (3 if args.quick else 7)
    if starts < 1 or runs < 1:
        p.error("--starts and --runs must be at least 1")
    doc = run(starts, runs, kernel=not args.no_kernel, cc=args.cc)
    print(format_table(doc))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1))
    problems = well_formed(doc)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
