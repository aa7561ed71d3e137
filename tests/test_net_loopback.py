"""cancho programs using the network builtins for real, on loopback, on both backends (issue 14).

The programs are in tests/net/. Each binds 127.0.0.1-reachable sockets on a port the operating
system chose: either the program binds port 0 and prints what it got (`udp_local_port`), or the
test binds a Python socket to port 0, reads the port, closes it and hands the port to the program
(a TCP listener has no builtin that tells its port). Every program ends by itself once it has
done its part and closes everything it opened; a test that fails kills the process it started.

* `http_server.cho`: std.http and std.route behind a real `tcp_listen`/`tcp_accept`, answering
  Python's `http.client` (the proxy version, where Python owns the socket, is in test_std.py);
* `udp_echo.cho`: a datagram echo answered to each sender's ticket, a Python client;
* `udp_client.cho`: a std.udps table holding a connected socket, against a Python echo server;
* `server_and_client.cho`: one program that listens and dials itself through one poller;
* `signal_wait.cho`: a signal claim woken by a real SIGUSR1, and `signal_close_delivers.cho`: a
  TERM left unread is delivered when the claim ends (both exe only: the JIT runs the program in a
  child of the CLI, whose own process would take the signal too).
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends.exe import build_executable

NET = Path(__file__).resolve().parent / "net"
BACKENDS = ("jit", "exe")
# Only a hang guard for a process that never ends; no test asserts a duration.
GUARD = 120


def free_tcp_port() -> int:
    """A port the operating system picks for 127.0.0.1, released again for the program."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def started(program: str, backend: str, *args: str) -> Iterator[subprocess.Popen]:
    """`cancho run --backend <backend> tests/net/<program> -- <args>`, stdout piped; killed if
    the test leaves it running."""
    cmd = [sys.executable, "-m", "cancho_kernel.cli", "run", "--backend", backend, str(NET / program), "--", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=GUARD)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=GUARD)
    return proc.returncode, out.decode(), err.decode()


def request(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=GUARD)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


CASES = [
    ("GET", "/users/42", 200, b"42"),
    ("GET", "/users/a%20b", 200, b"a b"),
    ("GET", "/health", 200, b"ok"),
    ("DELETE", "/users/7", 204, b""),
    ("GET", "/nowhere", 404, b"not found"),
    ("POST", "/users/1", 405, b""),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_http_server_answers_http_client(backend: str) -> None:
    port = free_tcp_port()
    with started("http_server.cho", backend, str(port), str(len(CASES) + 1)) as proc:
        assert proc.stdout.readline() == b"listening\n", proc.stderr.read().decode()
        for method, path, status, body in CASES:
            got_status, headers, got_body = request(port, method, path)
            assert (method, path, got_status, got_body) == (method, path, status, body)
            assert headers["Connection"] == "close"
            if status == 405:
                assert headers["Allow"] == "GET, DELETE"
            elif status != 204:
                assert headers["Content-Type"] == "text/plain"
                assert headers["Content-Length"] == str(len(body))
        # A head with no Host is refused with the reason, read off a raw socket.
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\n\r\n")
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.split(b"\r\n")[0] == b"HTTP/1.1 400 Bad Request"
        assert body == b"missing or repeated Host"
        status, out, err = finish(proc)
    assert (status, out, err) == (0, "", "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_udp_echo_answers_each_sender(backend: str) -> None:
    with started("udp_echo.cho", backend, "3") as proc:
        first = proc.stdout.readline().decode()
        assert first.startswith("port "), proc.stderr.read().decode()
        port = int(first.split()[1])
        assert 0 < port < 65536
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
            a.settimeout(GUARD)
            b.settimeout(GUARD)
            a.sendto(b"one", ("127.0.0.1", port))
            assert a.recvfrom(100) == (b"echo: one", ("127.0.0.1", port))
            b.sendto(b"two from b", ("127.0.0.1", port))
            assert b.recv(100) == b"echo: two from b"
            a.sendto(b"x" * 600, ("127.0.0.1", port))
            assert a.recv(100) == b"echo: too long"
        status, out, err = finish(proc)
    assert (status, out, err) == (0, "answered 3\n", "")


@contextmanager
def python_udp_echo() -> Iterator[int]:
    """A Python datagram echo server on 127.0.0.1 (port 0), for as long as the block runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(1024)
            except socket.timeout:
                continue
            sock.sendto(b"pong for " + data, peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        sock.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_udp_client_through_a_std_udps_table(backend: str) -> None:
    with python_udp_echo() as port:
        with started("udp_client.cho", backend, str(port)) as proc:
            status, out, err = finish(proc)
    assert (status, err) == (0, "")
    assert out == ("a local port was chosen\n"
                   "pong for ping 1\npong for ping 2\npong for ping 3\n"
                   "closed 1\n")


SERVER_AND_CLIENT = ("client: connect status 0\n"
                     "server: accepted 1\n"
                     "server: got hello over loopback\n"
                     "client: got echo: hello over loopback\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_program_is_server_and_client(backend: str) -> None:
    with started("server_and_client.cho", backend, str(free_tcp_port())) as proc:
        status, out, err = finish(proc)
    assert (status, out, err) == (0, SERVER_AND_CLIENT, "")


def test_a_claimed_signal_wakes_the_poller(tmp_path: Path) -> None:
    result = api.compile_sources([api.SourceFile.from_path(NET / "signal_wait.cho")])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    exe = tmp_path / "signal_wait"
    build_executable(result.ir, exe)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"added 0\n"
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out, err) == (0, b"woken: 1 token 9\ngot USR1\nthen pending: 0\n", b"")


def test_an_unread_signal_is_delivered_when_the_claim_ends(tmp_path: Path) -> None:
    result = api.compile_sources([api.SourceFile.from_path(NET / "signal_close_delivers.cho")])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)
    exe = tmp_path / "signal_close_delivers"
    build_executable(result.ir, exe)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out, err) == (-signal.SIGTERM, b"closing the claim\n", b"")
