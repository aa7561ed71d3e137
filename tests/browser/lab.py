"""A JupyterLab server and a headless Chromium for the browser suite.

The server runs in its own process group on a loopback port with a random token, with settings,
workspaces and runtime files in a temporary directory, so a test run never reads or writes the
user's Lab state. Chromium is Debian's (``/usr/bin/chromium``, or ``CANCHO_CHROMIUM``): these
machines cannot download Playwright's own browser builds.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]

# User settings for the test Lab: no news fetch (the machine has no network), no "what's new"
# notifications covering the page, and a window-sized notebook so screenshots show cells.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _die_with_parent() -> None:
    """In the server's child, before exec: SIGTERM when the test process dies, so a killed test
    run (its fixtures never torn down) does not leave a Lab server and its kernels behind; Lab
    shuts its kernels down on SIGTERM."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def chromium_path() -> str | None:
    """Debian's Chromium, or the one named by CANCHO_CHROMIUM."""
    named = os.environ.get("CANCHO_CHROMIUM")
    if named:
        return named if Path(named).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """One ``jupyter lab`` process serving ``root``; ``url(path)`` gives an authenticated address."""

    root: Path
    state: Path
    port: int = field(default_factory=_free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    def start(self, timeout: float = 90.0) -> "LabServer":
        settings = self.state / "settings"
        for name, value in LAB_SETTINGS.items():
            target = settings / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value))
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.state / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(self.state / "runtime"), JUPYTER_ALLOW_INSECURE_WRITES="1")
        self.log_path = self.state / "lab.log"
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
             f"--ServerApp.root_dir={self.root}", f"--IdentityProvider.token={self.token}",
             "--ServerApp.port_retries=0", "--LabApp.news_url=", "--ServerApp.open_browser=False",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{self.log()}")

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET", body: dict | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/{path}", data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:] if self.log_path else ""
        except OSError:
            return ""

    def stop(self) -> None:
        """End the server and every kernel it started (its whole process group)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self.proc = None
