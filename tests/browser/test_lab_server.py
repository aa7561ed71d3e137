"""The test Lab server ends with the process that started it, even when that process is killed
and never tears its fixtures down (a leaked server kept 64 kernels running once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

HOLDER = f"""
import sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {str(HERE)!r})
from lab import LabServer
server = LabServer(Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())).start()
print(server.proc.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_lab_server_dies_with_a_killed_test_process(cancho_kernelspec):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        server = int(holder.stdout.readline())
        assert _alive(server)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(server):
        time.sleep(0.2)
    alive = _alive(server)
    if alive:
        os.killpg(server, signal.SIGKILL)
    assert not alive, "the Lab server outlived the process that started it"
