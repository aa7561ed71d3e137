"""Our own costs, part two: a hello cell's round trip through a real kernel, per backend.

A kernel is started with jupyter_client exactly as a notebook starts it (from a kernelspec made
for this run in a temporary folder, so nothing is installed), and a cell that prints
``hello, world`` is executed with ``%%run --backend B``: the time from sending the request to
the kernel going idle, as a frontend sees it. The first cell after start-up is reported apart
(it may wait for the kernel's background warm-up); then ``runs`` cells per backend, interleaved.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def _summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def measure(runs: int, backends: tuple[str, ...] = ("jit", "exe")) -> dict[str, Any]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
    except ImportError as exc:
        return {"status": "unavailable", "reason": f"jupyter_client not importable: {exc}"}
    repo = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory(prefix="cancho-kspec-") as tmp:
        spec_dir = Path(tmp) / "kernels" / "cancho-bench"
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "cancho_kernel", "-f", "{connection_file}"],
            "display_name": "cancho (bench)", "language": "cancho", "interrupt_mode": "signal",
            "env": {"PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)}}))
        ksm = KernelSpecManager(kernel_dirs=[str(Path(tmp) / "kernels")])
        km = KernelManager(kernel_name="cancho-bench", kernel_spec_manager=ksm)
        t0 = time.perf_counter()
        try:
            km.start_kernel()
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=60)
        except Exception as exc:
            try:
                km.shutdown_kernel(now=True)
            except Exception:
                pass
            return {"status": "failed", "reason": f"the kernel did not start: {exc}"}
        ready = (time.perf_counter() - t0) * 1e3
        try:
            def cell(backend: str) -> float:
                out: list[str] = []

                def hook(msg: dict) -> None:
                    if msg["msg_type"] == "stream":
                        out.append(msg["content"]["text"])

                s = time.perf_counter()
                reply = kc.execute_interactive(f"%%run --backend {backend}\n{HELLO}", output_hook=hook,
                                               timeout=60)
                ms = (time.perf_counter() - s) * 1e3
                if reply["content"]["status"] != "ok" or "".join(out) != "hello, world\n":
                    raise RuntimeError(f"the hello cell failed on {backend}: {reply['content']}")
                return ms

            first = {b: cell(b) for b in backends}
            samples: dict[str, list[float]] = {b: [] for b in backends}
            for _ in range(runs):
                for b in backends:
                    samples[b].append(cell(b))
        except Exception as exc:
            return {"status": "failed", "reason": str(exc)}
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"status": "ok", "ready_ms": ready, "first_cell_ms": first,
            "ms": {b: _summary(v) for b, v in samples.items()}}


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 10)))
