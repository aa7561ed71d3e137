"""JupyterHub under load: N students run the authority course at once (issue 17), and an idle
kernel's cost.

``python -m benchmarks.hub_load [--users 5 10 20] [--deadline 900] [--json PATH]`` starts the hub of
``deploy/jupyterhub/`` on loopback (dummy authenticator, a fresh temporary root, an admin service
token), creates the users through the hub's REST API, starts their servers and has each run every
code cell of ``notebooks/authority-model.ipynb`` through the kernels REST and websocket API of its
own server. It prints server start latency, cell latency, peak memory per user (PSS and RSS of the
user's server, kernel, JIT worker and runs, sampled) and errors for each N, then a capacity estimate
for a 2-core / 24 GiB machine. ``--kernel-cost`` measures one idle kernel instead (start to ready,
PSS/RSS of the kernel and its JIT worker).

Bounded: at most ``--max-users`` users, every wait has a timeout and the whole run a deadline.
It stops by itself and kills everything it started (also on Ctrl-C or SIGTERM): every process of
a hub run carries ``CANCHO_HUB_RUN=<id>`` in its environment, and whatever still carries it after
the hub has stopped is killed. ``Hub`` is also the test suite's hub (tests/test_hub.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "deploy" / "jupyterhub" / "jupyterhub_config.py"
COURSE = REPO / "notebooks" / "authority-model.ipynb"
MARK = "CANCHO_HUB_RUN"
MAX_USERS = 40
MIB = 1 << 20


class HubError(RuntimeError):
    """The hub did not start, or answered a request with an error."""


def free_port_block(count: int = 3) -> int:
    """A port P with P .. P+count-1 free on loopback (the hub uses P, P+1 and P+2)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        socks = []
        try:
            for i in range(count):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise HubError("no free block of ports on loopback")


def marked_processes(run_id: str) -> list:
    """Every live process whose environment holds this hub run's mark."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid != os.getpid() and p.environ().get(MARK) == run_id:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def kill_marked(run_id: str) -> int:
    """SIGKILL what this run left; answers how many there were."""
    import psutil

    left = marked_processes(run_id)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    return len(left)


def proxy_command(cache: Path | None = None, timeout: float = 300.0) -> str:
    """configurable-http-proxy: ``CANCHO_HUB_CHP``, on PATH, or in the cache directory that
    deploy/jupyterhub/setup.sh fills (installed there with npm if missing)."""
    import shutil

    given = os.environ.get("CANCHO_HUB_CHP")
    if given:
        return given
    cache = cache or Path(os.environ.get("CANCHO_HUB_CACHE", Path.home() / ".cache" / "cancho-hub"))
    local = cache / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
    found = shutil.which("configurable-http-proxy") or (str(local) if local.exists() else None)
    if found:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise HubError("configurable-http-proxy is missing and npm is not installed "
                       "(sh deploy/jupyterhub/setup.sh installs it)")
    (cache / "chp").mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(cache / "chp"), "--no-audit", "--no-fund",
                    "--loglevel=error", "configurable-http-proxy@^4.6"], check=True, timeout=timeout,
                   stdin=subprocess.DEVNULL)
    return str(local)


def blocked_parent(path: Path) -> Path | None:
    """The nearest parent of ``path`` other users cannot pass through (``/root``, for a Python
    installed in root's home), or None."""
    for parent in reversed(path.resolve().parents):
        if not parent.stat().st_mode & 0o001:
            return parent
    return None


def installed_checkout() -> Path | None:
    """The checkout ``python -I`` imports cancho_kernel from (an editable install's), or None."""
    done = subprocess.run([sys.executable, "-I", "-c", "import cancho_kernel; print(cancho_kernel.__file__)"],
                          capture_output=True, text=True, timeout=60, cwd="/", stdin=subprocess.DEVNULL)
    return Path(done.stdout.strip()).parent.parent if done.returncode == 0 and done.stdout.strip() else None


def reachable_command(cmd: list[str], scratch: Path, needed: list[Path],
                      overlay: tuple[Path, Path] | None = None) -> list[str]:
    """``cmd`` in a mount namespace of its own where students' processes can reach ``needed``
    (and, with ``overlay`` = (this checkout, the installed one), run this checkout's kernel).

    A test machine may have its Python inside root's home (mode 0700), which no student's server
    could execute. Rather than open that home, the hub runs with a view where the blocked
    directory is an empty ``0711`` tmpfs holding only the entries on the way to ``needed``
    (bind-mounted back): the rest of root's home stays out of sight, for students and hub alike."""
    blocked = {b for b in (blocked_parent(p) for p in needed) if b is not None}
    if not (blocked or overlay) or os.geteuid() != 0:
        return cmd
    import shlex

    lines = ["set -e"]
    if overlay:  # this checkout where the installed one is: the hub's kernels run this code
        lines.append(f"mount --bind {shlex.quote(str(overlay[0]))} {shlex.quote(str(overlay[1]))}")
    for i, b in enumerate(sorted(blocked)):
        keep = sorted({b / p.resolve().relative_to(b).parts[0] for p in needed
                       if p.resolve().is_relative_to(b) and p.resolve() != b})
        for j, k in enumerate(keep):
            lines += [f"mkdir -p {scratch}/{i}-{j}", f"mount --bind {shlex.quote(str(k))} {scratch}/{i}-{j}"]
        lines.append(f"mount -t tmpfs -o mode=0711,size=1m cancho-hub {shlex.quote(str(b))}")
        for j, k in enumerate(keep):
            kind = "mkdir" if k.is_dir() else "touch"
            lines += [f"{kind} {shlex.quote(str(k))}", f"mount --move {scratch}/{i}-{j} {shlex.quote(str(k))}"]
    lines.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(lines), "sh", *cmd]


class Hub:
    """One JupyterHub of deploy/jupyterhub on loopback, in its own temporary root.

    Run as root (as a course's hub is), each student gets a Unix account of this run
    (``account_prefix`` + name), removed again when the hub is killed."""

    def __init__(self, root: Path, *, mem_limit: str = "2G", cpu_limit: str = "2",
                 start_timeout: float = 90.0, server_timeout: int = 120) -> None:
        self.root = root
        self.run_id = uuid.uuid4().hex
        self.token = uuid.uuid4().hex + uuid.uuid4().hex
        self.port = free_port_block(3)
        self.url = f"http://127.0.0.1:{self.port}"
        self.mem_limit, self.cpu_limit = mem_limit, cpu_limit
        self.start_timeout = start_timeout
        self.server_timeout = server_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = root / "jupyterhub.log"
        self.account_prefix = f"ch{self.run_id[:6]}-"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            MARK: self.run_id, "CANCHO_HUB_ROOT": str(self.root), "CANCHO_HUB_PORT": str(self.port),
            "CANCHO_HUB_AUTH": "dummy", "CANCHO_HUB_API_TOKEN": self.token,
            "CANCHO_HUB_MEM_LIMIT": self.mem_limit, "CANCHO_HUB_CPU_LIMIT": self.cpu_limit,
            "CANCHO_HUB_IDLE_CULL": "0", "CANCHO_HUB_CHP": proxy_command(),
            "CANCHO_HUB_START_TIMEOUT": str(self.server_timeout),
            "CANCHO_HUB_ACCOUNT_PREFIX": self.account_prefix,
        })
        return env

    def start(self) -> None:
        import requests

        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o711)  # students pass through to their homes (the hub checks the parents)
        log = open(self.log_path, "ab")
        self.log_path.chmod(0o600)  # in the hub's root, which students pass through
        env = self.env()
        scratch = self.root / "view"  # mount points while the hub's view is made (hub_layout ignores it)
        installed = installed_checkout()
        cmd = reachable_command([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], scratch,
                                [Path(sys.prefix), Path(sys.executable), REPO, Path(env["CANCHO_HUB_CHP"])],
                                (REPO, installed) if installed and installed.resolve() != REPO.resolve() else None)
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HubError(f"the hub exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/hub/api/", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise HubError(f"the hub did not answer in {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def api(self, method: str, path: str, body: dict | None = None, *, timeout: float = 30.0,
            ok: tuple[int, ...] = (200, 201, 202, 204)):
        """A hub REST call (``path`` after ``/hub/api``); answers the decoded JSON or None."""
        import requests

        r = requests.request(method, self.url + "/hub/api" + path, json=body, headers=self.headers(),
                             timeout=timeout)
        if r.status_code not in ok:
            raise HubError(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json() if r.content else None

    def server(self, user: str, method: str, path: str, body: dict | None = None, *,
               timeout: float = 60.0):
        """A request to USER's own server (``path`` after ``/user/USER``) through the proxy."""
        import requests

        return requests.request(method, f"{self.url}/user/{user}{path}", json=body, headers=self.headers(),
                                timeout=timeout)

    def create_users(self, names: list[str]) -> None:
        self.api("POST", "/users", {"usernames": names}, ok=(201, 409))

    def start_server(self, user: str, timeout: float = 120.0) -> float:
        """Start USER's server and wait until it is ready; answers the seconds it took.

        It waits on the hub's progress stream (one long request), not by polling the user's model:
        twenty students polling every 0.1 s kept the hub busy enough to slow the very starts
        being measured."""
        import requests

        t0 = time.perf_counter()
        self.api("POST", f"/users/{user}/server", timeout=timeout, ok=(201, 202, 400))
        with requests.get(f"{self.url}/hub/api/users/{user}/server/progress", headers=self.headers(),
                          stream=True, timeout=timeout) as r:
            if r.status_code != 200:
                raise HubError(f"{user}: progress: {r.status_code} {r.text[:300]}")
            deadline = time.monotonic() + timeout
            for line in r.iter_lines(decode_unicode=True):
                if time.monotonic() > deadline:
                    break
                if not line or not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("ready"):
                    return time.perf_counter() - t0
                if event.get("failed"):
                    raise HubError(f"{user}'s server failed to start: {event.get('message', '')[:300]}")
        model = self.api("GET", f"/users/{user}")
        if ((model.get("servers") or {}).get("") or {}).get("ready"):
            return time.perf_counter() - t0
        raise HubError(f"{user}'s server was not ready in {timeout:.0f} s")

    def home(self, user: str) -> Path:
        return self.root / "users" / user

    def private(self, user: str) -> Path:
        """The student's runtime directory and build cache (deploy/jupyterhub/hub_layout.py)."""
        return self.root / "private" / user

    def unix_user(self, user: str) -> str:
        return self.account_prefix + user

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM the hub (it stops every server and its proxy) and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def leftovers(self) -> list:
        return marked_processes(self.run_id)

    def kill_everything(self) -> int:
        """Kill what is left of this run, then remove the students' accounts it made."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        left = kill_marked(self.run_id)
        if os.geteuid() == 0:
            sys.path.insert(0, str(CONFIG.parent))
            from system_users import remove_accounts

            remove_accounts(self.account_prefix)
        return left


@contextmanager
def running_hub(root: Path | None = None, **kwargs) -> Iterator[Hub]:
    """A started hub; on the way out it is stopped and anything of it still alive is killed."""
    with tempfile.TemporaryDirectory(prefix="cancho-hub-", dir="/tmp") as tmp:
        hub = Hub(Path(root or tmp), **kwargs)
        try:
            hub.start()
            yield hub
        finally:
            try:
                hub.stop()
            finally:
                hub.kill_everything()


# -- a kernel through the server's REST and websocket API ---------------------------------------------


@dataclass
class Reply:
    """One executed cell as the websocket saw it."""

    status: str
    seconds: float
    outputs: list[dict]

    def text(self, name: str = "stdout") -> str:
        return "".join(o["text"] for o in self.outputs if o.get("name") == name and "text" in o)

    @property
    def error(self) -> dict:
        return next((o for o in self.outputs if "ename" in o), {})


class RemoteKernel:
    """A kernel of USER's server, started as a notebook session at PATH (its directory is cwd)."""

    def __init__(self, hub: Hub, user: str, path: str, timeout: float = 60.0) -> None:
        import websocket

        self.hub, self.user = hub, user
        r = hub.server(user, "POST", "/api/sessions",
                       {"path": path, "type": "notebook", "name": Path(path).name, "kernel": {"name": "cancho"}},
                       timeout=timeout)
        if r.status_code != 201:
            raise HubError(f"{user}: starting a kernel: {r.status_code} {r.text[:300]}")
        model = r.json()
        self.session_id, self.kernel_id = model["id"], model["kernel"]["id"]
        self.client_session = uuid.uuid4().hex
        ws_url = (hub.url.replace("http", "ws", 1) + f"/user/{user}/api/kernels/{self.kernel_id}/channels"
                  f"?session_id={self.client_session}")
        self.ws = websocket.create_connection(ws_url, header=[f"Authorization: token {hub.token}"],
                                              timeout=timeout)
        self.request("kernel_info_request", {}, timeout=timeout)

    def _send(self, msg_type: str, content: dict) -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": msg_type, "username": self.user,
                       "session": self.client_session, "version": "5.3",
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "content": content, "channel": "shell", "buffers": [],
        }))
        return msg_id

    def request(self, msg_type: str, content: dict, timeout: float = 120.0) -> Reply:
        """Send a shell request; collect IOPub outputs until idle and the shell reply has come."""
        import websocket

        t0 = time.perf_counter()
        msg_id = self._send(msg_type, content)
        outputs: list[dict] = []
        status, idle = None, False
        deadline = time.monotonic() + timeout
        while status is None or not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HubError(f"{self.user}: no reply to {msg_type} in {timeout:.0f} s")
            self.ws.settimeout(left)
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == msg_type.replace("_request", "_reply"):
                status = msg["content"].get("status", "ok")
            elif kind == "status":
                idle = msg["content"]["execution_state"] == "idle"
            elif kind in ("stream", "error", "display_data", "execute_result"):
                outputs.append(msg["content"])
        return Reply(status, time.perf_counter() - t0, outputs)

    def execute(self, code: str, timeout: float = 120.0) -> Reply:
        return self.request("execute_request", {"code": code, "silent": False, "store_history": True,
                                                "user_expressions": {}, "allow_stdin": False,
                                                "stop_on_error": False}, timeout)

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.hub.server(self.user, "DELETE", f"/api/sessions/{self.session_id}", timeout=30)


# -- memory of a user's processes -------------------------------------------------------------------


class MemorySampler(threading.Thread):
    """Samples, every ``interval`` seconds, each user's processes (found by ``JUPYTERHUB_USER``
    in their environment): PSS and RSS summed, each user's peak kept, and the CPU time of every
    process seen (its own and its reaped children's: a run's time lands in its JIT worker), so a
    user's CPU seconds are those of their server, kernel, worker and runs up to the last sample."""

    def __init__(self, run_id: str, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.run_id, self.interval = run_id, interval
        self.peak_pss: dict[str, int] = {}
        self.peak_rss: dict[str, int] = {}
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (user, CPU seconds at last sight)
        self.stopped = threading.Event()

    def sample(self) -> None:
        import psutil

        pss: dict[str, int] = {}
        rss: dict[str, int] = {}
        for p in psutil.process_iter(["pid"]):
            try:
                env = p.environ()
                if env.get(MARK) != self.run_id or "JUPYTERHUB_USER" not in env:
                    continue
                m = p.memory_full_info()
                t = p.cpu_times()
            except (psutil.Error, OSError):
                continue
            u = env["JUPYTERHUB_USER"]
            pss[u] = pss.get(u, 0) + m.pss
            rss[u] = rss.get(u, 0) + m.rss
            self.cpu[p.pid] = (u, t.user + t.system + t.children_user + t.children_system)
        for u in pss:
            self.peak_pss[u] = max(self.peak_pss.get(u, 0), pss[u])
            self.peak_rss[u] = max(self.peak_rss.get(u, 0), rss[u])

    def cpu_of(self, user: str) -> float:
        return sum(t for u, t in self.cpu.values() if u == user)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()


# -- the load run ------------------------------------------------------------------------------------


def course_cells(path: Path = COURSE) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and c.source.strip()]


@dataclass
class UserRun:
    """What one user saw."""

    user: str
    server_start: float | None = None
    kernel_ready: float | None = None
    cells: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def one_user(hub: Hub, user: str, cells: list[str], course: str, deadline: float, out: UserRun,
             sampler: MemorySampler) -> None:
    try:
        out.server_start = hub.start_server(user, timeout=max(5.0, deadline - time.monotonic()))
        t0 = time.perf_counter()
        k = RemoteKernel(hub, user, course)
        out.kernel_ready = time.perf_counter() - t0
        try:
            for i, code in enumerate(cells):
                left = deadline - time.monotonic()
                if left <= 0:
                    out.errors.append(f"deadline before cell {i}")
                    break
                r = k.execute(code, timeout=min(120.0, left))
                out.cells.append(r.seconds)
                if r.status != "ok":
                    out.errors.append(f"cell {i}: {r.error.get('ename')}: {r.error.get('evalue', '')[:120]}")
        finally:
            sampler.sample()  # the kernel's CPU time before it goes
            k.close()
    except Exception as e:  # one user's failure is a measured error, not the end of the run
        out.errors.append(f"{type(e).__name__}: {e}"[:300])


@dataclass
class LoadResult:
    users: int
    start_p50: float
    start_p95: float
    cell_p50: float
    cell_p95: float
    cells: int
    kernel_ready_p50: float
    peak_pss_mib: float  # the largest user's peak
    peak_rss_mib: float
    cpu_seconds_per_user: float  # mean over users: server start, kernel, worker, runs (sampled)
    hub_cpu_seconds: float  # the hub and its proxy
    wall_seconds: float
    load_average: tuple[float, float]  # 1-minute load before and after: other work on the machine
    errors: list[str]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def hub_cpu_seconds(hub: Hub) -> float:
    """CPU time of the hub and its proxy (the marked processes that serve no user)."""
    total = 0.0
    for p in hub.leftovers():
        try:
            if "JUPYTERHUB_USER" not in p.environ():
                t = p.cpu_times()
                total += t.user + t.system
        except Exception:
            continue
    return total


def load_run(n: int, deadline_s: float, server_timeout: int = 120) -> LoadResult:
    cells = course_cells()
    with running_hub(mem_limit="2G", cpu_limit="2", server_timeout=server_timeout) as hub:
        names = [f"student{i:02d}" for i in range(n)]
        hub.create_users(names)
        sampler = MemorySampler(hub.run_id)
        sampler.start()
        runs = [UserRun(u) for u in names]
        deadline = time.monotonic() + deadline_s
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        threads = [threading.Thread(target=one_user, args=(hub, u, cells, COURSE.name, deadline, r, sampler),
                                    daemon=True, name=u) for u, r in zip(names, runs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 30)
        wall = time.perf_counter() - t0
        sampler.sample()
        sampler.stopped.set()
        cpu = statistics.mean(sampler.cpu_of(u) for u in names)
        starts = [r.server_start for r in runs if r.server_start is not None]
        lat = [s for r in runs for s in r.cells]
        errors = [f"{r.user}: {e}" for r in runs for e in r.errors]
        errors += [f"{t.name}: still running at the deadline" for t in threads if t.is_alive()]
        ready = [r.kernel_ready for r in runs if r.kernel_ready is not None]
        return LoadResult(n, pct(starts, .5), pct(starts, .95), pct(lat, .5), pct(lat, .95), len(lat),
                          pct(ready, .5), max(sampler.peak_pss.values(), default=0) / MIB,
                          max(sampler.peak_rss.values(), default=0) / MIB, cpu, hub_cpu_seconds(hub), wall,
                          (load0, os.getloadavg()[0]), errors)


def capacity(results: list[LoadResult], cores: int = 2, mem_gib: int = 24) -> str:
    """Students a 2-core / 24 GiB machine holds. Memory: each student's peak (server, kernel,
    JIT worker, runs) with 2 GiB kept for the system and the hub. CPU: the CPU seconds of one
    student's whole session (server start, kernel start, every cell of the course) against the
    cores' seconds in 5 minutes, i.e. students whose sessions are spread over 5 minutes."""
    per_user = max(x.peak_pss_mib for x in results)
    by_mem = int((mem_gib - 2) * 1024 / per_user) if per_user else 0
    cpu = max(x.cpu_seconds_per_user for x in results)
    by_cpu = int(cores * 300 / cpu) if cpu else 0
    return (f"capacity on {cores} cores / {mem_gib} GiB: memory {by_mem} students (peak PSS {per_user:.0f} MiB "
            f"each); CPU {by_cpu} students per 5 minutes ({cpu:.1f} CPU s per session: server start, kernel, "
            f"the whole course); the smaller, {min(by_mem, by_cpu)}, is the estimate for a class whose "
            "logins are spread over 5 minutes (all at once, server starts queue: see the start column)")


def table(results: list[LoadResult]) -> str:
    rows = ["| N | server start p50 / p95 | kernel ready p50 | cell p50 / p95 | cells | peak PSS / RSS per user "
            "| CPU s per user | hub+proxy CPU s | wall | load before / after | errors |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r.users} | {r.start_p50:.1f} / {r.start_p95:.1f} s | {r.kernel_ready_p50:.1f} s "
                    f"| {r.cell_p50 * 1000:.0f} / {r.cell_p95 * 1000:.0f} ms | {r.cells} "
                    f"| {r.peak_pss_mib:.0f} / {r.peak_rss_mib:.0f} MiB | {r.cpu_seconds_per_user:.1f} "
                    f"| {r.hub_cpu_seconds:.1f} | {r.wall_seconds:.0f} s "
                    f"| {r.load_average[0]:.1f} / {r.load_average[1]:.1f} | {len(r.errors)} |")
    return "\n".join(rows)


# -- one idle kernel --------------------------------------------------------------------------------


@dataclass
class KernelCost:
    """An idle kernel: RSS counts shared pages (libLLVM, Python's own libraries) in full, PSS
    shares them among the processes mapping them, USS is what the process alone holds (what one
    more student costs on a hub where many kernels share those pages)."""

    ready_seconds: list[float]
    kernel_mib: dict[str, float]  # rss, pss, uss
    worker_mib: dict[str, float]
    mapped: dict[str, bool]  # heavy shared libraries mapped into the idle kernel


def kernel_cost(repeats: int = 5, settle: float = 2.0) -> KernelCost:
    """Start the cancho kernel as the hub does (safe mode, ``-I``) ``repeats`` times: seconds from
    launch to the kernel_info reply; after ``settle`` seconds idle, PSS/RSS of the kernel and its
    JIT worker, and which heavy modules the idle kernel has imported."""
    import psutil
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    sys.path.insert(0, str(CONFIG.parent))
    from safe_kernelspec import hub_kernelspec  # noqa: E402

    ready: list[float] = []
    kernel_mib: dict[str, float] = {}
    worker_mib: dict[str, float] = {}
    mapped: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="cancho-kcost-") as tmp:
        spec = hub_kernelspec(Path(tmp) / "data")
        env = dict(os.environ, CANCHO_SAFE="1")
        for _ in range(repeats):
            km = KernelManager(kernel_name="cancho",
                               kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
            t0 = time.perf_counter()
            km.start_kernel(env=env, cwd=tmp)
            kc = km.client()
            kc.start_channels()
            try:
                kc.wait_for_ready(timeout=60)
                ready.append(time.perf_counter() - t0)
                time.sleep(settle)
                kernel = psutil.Process(km.provisioner.process.pid)
                workers = kernel.children(recursive=True)
                k = kernel.memory_full_info()
                w = [p.memory_full_info() for p in workers]
                kernel_mib = {f: round(getattr(k, f) / MIB, 1) for f in ("rss", "pss", "uss")}
                worker_mib = {f: round(sum(getattr(x, f) for x in w) / MIB, 1) for f in ("rss", "pss", "uss")}
                mapped = _mapped(kernel.pid)
            finally:
                kc.stop_channels()
                km.shutdown_kernel(now=True)
    return KernelCost([round(x, 3) for x in ready], kernel_mib, worker_mib, mapped)


def _mapped(pid: int) -> dict[str, bool]:
    """Which heavy libraries are mapped into the process (shared objects in /proc/PID/maps)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {"llvmlite (libllvmlite)": "libllvmlite" in maps, "matplotlib (_path)": "matplotlib" in maps,
            "numpy": "numpy" in maps}


# -- command line -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hub_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, nargs="+", default=[5, 10, 20])
    ap.add_argument("--deadline", type=float, default=900.0, help="seconds for each N (default 900)")
    ap.add_argument("--start-timeout", type=int, default=120,
                    help="seconds the hub gives a server to start (CANCHO_HUB_START_TIMEOUT; default 120)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--kernel-cost", action="store_true", help="measure one idle kernel instead")
    args = ap.parse_args(argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.kernel_cost:
            cost = kernel_cost()
            print(json.dumps(asdict(cost), indent=1))
            return 0
        if any(n < 1 or n > MAX_USERS for n in args.users):
            ap.error(f"--users: between 1 and {MAX_USERS}")
        results = []
        for n in args.users:
            r = load_run(n, args.deadline, args.start_timeout)
            results.append(r)
            print(f"N={n}: {len(r.errors)} errors" + "".join(f"\n  {e}" for e in r.errors[:10]), flush=True)
        print(table(results))
        print(capacity(results))
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
        return 1 if any(r.errors for r in results) else 0
    except KeyboardInterrupt:
        print("interrupted: the hub and everything it started were stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
