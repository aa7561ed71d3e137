"""The example programs under ``examples/`` checked against the programs they port.

* ``examples/base64/`` byte for byte against coreutils ``base64``, both ways, on random inputs
  of many sizes, every accepted spelling of its flags, and its refusals;
* ``examples/sort/`` against ``LC_ALL=C sort`` on random line sets, several files, stdin, and an
  unreadable file;
* ``examples/serve/`` answering real HTTP requests on loopback;
* ``examples/cut/`` against coreutils ``cut`` on random delimited text and field lists.

Every program is compiled once, then run on **both** backends: a linked executable and the MCJIT
worker, with the same argv (``argv[0]`` first). The worker keeps one compiled program, so the
tests of one example sit together.

The larger runs (4 MiB through base64, 300,000 lines through sort) are marked ``slow``.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, diagnostics
from cancho_kernel.compiler.backends import exe, jit, process

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

PROGRAMS = {
    "base64": [EXAMPLES / "base64" / "base64.cho"],
    "sort": [EXAMPLES / "sort" / "sort.cho"],
    "serve": [EXAMPLES / "serve" / "serve.cho", EXAMPLES / "serve" / "sockets.cho"],
    "cut": [EXAMPLES / "cut" / "cut.cho"],
}

BACKENDS = ("exe", "jit")
LIMITS = process.RunLimits(timeout=30.0, max_output=64 << 20)
C_LOCALE = {**os.environ, "LC_ALL": "C"}


def need(tool: str) -> str:
    """The path of a coreutils program the comparison needs (skip when absent or not GNU)."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"`{tool}` is not installed")
    version = subprocess.run([path, "--version"], capture_output=True, env=C_LOCALE)
    if b"GNU coreutils" not in version.stdout:
        pytest.skip(f"`{tool}` is not GNU coreutils")
    return path


def reference(argv: list[str], stdin: bytes = b"", name: str | None = None):
    """Run a coreutils program under the C locale; `name` is the argv[0] it sees (GNU
    prefixes its messages with it)."""
    command = [name, *argv[1:]] if name else argv
    return subprocess.run(command, executable=argv[0], input=stdin, capture_output=True,
                          env=C_LOCALE, timeout=60)


# ------------------------------------------------------------------------------ fixtures


class Built:
    """One example, compiled once: its IR (for the JIT) and its linked executable."""

    def __init__(self, name: str, ir: str, binary: Path, worker: jit.JitWorker) -> None:
        self.name = name
        self.ir = ir
        self.binary = binary
        self.worker = worker

    def run(self, backend: str, args: list[str] = (), stdin: bytes = b"",
            limits: process.RunLimits = LIMITS) -> process.RunResult:
        argv = [self.name, *args]
        target = process.StdoutTarget.pipe()
        if backend == "exe":
            return process.run_executable(self.binary, argv, stdin, target, limits)
        return self.worker.run(self.ir, argv, stdin, target, limits)


@pytest.fixture(scope="module")
def worker():
    w = jit.JitWorker()
    yield w
    w.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory, worker):
    """Compile each example on first use; a refusal fails the tests of that example only."""
    out = tmp_path_factory.mktemp("examples")
    cache: dict[str, Built] = {}

    def get(name: str) -> Built:
        if name not in cache:
            compiled = api.compile_sources(api.load_sources(PROGRAMS[name]))
            assert compiled.ok, (f"examples/{name} must compile, but was refused:\n"
                                 + diagnostics.render_text(compiled.diagnostics))
            binary = out / name
            exe.build_executable(compiled.ir, binary)
            cache[name] = Built(name, compiled.ir, binary, worker)
        return cache[name]

    return get


def ended(run: process.RunResult) -> str:
    if run.timed_out:
        return "timed out"
    if run.signal is not None:
        return f"killed by signal {run.signal}"
    return f"exit status {run.exit_status}"


def assert_same(run: process.RunResult, ref: subprocess.CompletedProcess, what: str) -> None:
    """Same stdout and the same exit status as the reference program."""
    assert run.exit_status == ref.returncode, (
        f"{what}: {ended(run)}, the reference exited {ref.returncode}; stderr {run.stderr!r}")
    assert run.stdout == ref.stdout, (
        f"{what}: stdout differs from the reference ({len(run.stdout)} vs {len(ref.stdout)} "
        f"bytes; first difference at {first_difference(run.stdout, ref.stdout)})")


def first_difference(a: bytes, b: bytes) -> int:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


# ------------------------------------------------------------------------------ base64

SIZES = [0, 1, 2, 3, 4, 56, 57, 58, 75, 76, 77, 1000, 4095, 4096, 100_000]


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.mark.parametrize("backend", BACKENDS)
def test_base64_encodes_like_coreutils(built, backend):
    tool = need("base64")
    program = built("base64")
    rng = random.Random(64)
    sizes = SIZES + [rng.randrange(1, 5000) for _ in range(4)]
    for size in sizes:
        data = random_bytes(size, size)
        assert_same(program.run(backend, [], data), reference([tool], data),
                    f"encoding {size} bytes")


@pytest.mark.parametrize("backend", BACKENDS)
def test_base64_decodes_what_coreutils_encodes(built, backend):
    tool = need("base64")
    program = built("base64")
    for size in SIZES:
        data = random_bytes(size, 1000 + size)
        encoded = reference([tool], data).stdout
        run = program.run(backend, ["-d"], encoded)
        assert run.exit_status == 0, f"decoding {size} bytes: {ended(run)}, {run.stderr!r}"
        assert run.stdout == data, f"decoding {size} bytes gave different bytes"
        assert run.stderr == b""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [
    ["-d"], ["--decode"], ["-d", "-"], ["--", ], ["-"], ["-d", "--"], ["-d", "-d"],
    ["--decode", "-"],
], ids=lambda a: " ".join(a) or "none")
def test_base64_spellings_agree_with_coreutils(built, backend, args):
    tool = need("base64")
    program = built("base64")
    decoding = "-d" in args or "--decode" in args
    data = b"aGkgdGhlcmUK\n" if decoding else b"hi there\n"
    assert_same(program.run(backend, args, data), reference([tool, *args], data), " ".join(args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", [
    b"aG!k", b"aGk", b"a", b"====", b"aGk==", b"aGk=x", b"aG=k", b"aGk\r\n", b"aGVsbG8*\n",
    b"\xff\xfe",
], ids=repr)
def test_base64_refuses_bad_input_like_coreutils(built, backend, text):
    """Status 1, GNU's message, and the same bytes GNU decoded before it noticed."""
    tool = need("base64")
    run = built("base64").run(backend, ["-d"], text)
    ref = reference([tool, "-d"], text)
    assert_same(run, ref, f"decoding {text!r}")
    assert run.stderr == b"base64: invalid input\n"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", [b"aGk=aGk=", b"aR==", b"aG\nk=\n\n", b"\n\n"], ids=repr)
def test_base64_accepts_what_coreutils_accepts(built, backend, text):
    tool = need("base64")
    run = built("base64").run(backend, ["-d"], text)
    assert_same(run, reference([tool, "-d"], text), f"decoding {text!r}")
    assert run.stderr == b""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [
    ["-i"], ["-d", "-i"], ["-di"], ["-w", "0"], ["-w0"], ["--wrap=0"], ["--ignore-garbage"],
    ["-x"], ["--frobnicate"], ["some-file"], ["-d", "some-file"],
], ids=lambda a: " ".join(a))
def test_base64_refuses_options_it_does_not_implement(built, backend, args):
    """GNU's -i and -w are refused on purpose (docs/flags.md §4): status 1 with a message on
    stderr and nothing on stdout, rather than accepting and ignoring them."""
    run = built("base64").run(backend, args, b"aGk=\n")
    assert run.exit_status == 1, f"{args}: {ended(run)}"
    assert run.stderr.startswith(b"base64: ") and run.stderr.endswith(b"\n")
    assert run.stdout == b""


def test_base64_unknown_option_status_matches_coreutils(built):
    tool = need("base64")
    ref = reference([tool, "-x"], b"")
    run = built("base64").run("exe", ["-x"], b"")
    assert run.exit_status == ref.returncode == 1
    assert run.stderr and ref.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_base64_four_mebibytes_both_ways(built, backend):
    tool = need("base64")
    program = built("base64")
    data = random_bytes(4 << 20, 4)
    ref = reference([tool], data)
    assert_same(program.run(backend, [], data), ref, "encoding 4 MiB")
    run = program.run(backend, ["-d"], ref.stdout)
    assert run.exit_status == 0 and run.stdout == data


# ------------------------------------------------------------------------------ sort


def random_lines(rng: random.Random, count: int, alphabet: bytes, longest: int) -> list[bytes]:
    return [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))
            for _ in range(count)]


def line_sets(seed: int) -> list[bytes]:
    """Texts to sort: empty, one line, no final newline, many duplicates, bytes above 127,
    control bytes below the newline, prefixes of each other, blank lines."""
    rng = random.Random(seed)
    texts = [b"", b"\n", b"one", b"one\n", b"b\na", b"\n\n\n", b"a\nab\na\nabc\nab\n",
             b"x\x01\nx\n\x00\nx\t\n"]
    for _ in range(12):
        alphabet = rng.choice([b"ab", b"abcAB ,", b"az\x01\t\xff\x80 ", bytes(range(256))])
        lines = random_lines(rng, rng.randint(1, 400), alphabet.replace(b"\n", b""),
                             rng.choice([2, 8, 40]))
        text = b"\n".join(lines)
        texts.append(text + rng.choice([b"", b"\n"]))
    return texts


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_files_like_gnu_sort(built, backend, tmp_path):
    tool = need("sort")
    program = built("sort")
    for k, text in enumerate(line_sets(9)):
        path = tmp_path / f"in{k}.txt"
        path.write_bytes(text)
        assert_same(program.run(backend, [str(path)]), reference([tool, str(path)]),
                    f"sorting {text[:40]!r}...")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_stdin_like_gnu_sort(built, backend):
    tool = need("sort")
    program = built("sort")
    for text in line_sets(10)[:10]:
        assert_same(program.run(backend, [], text), reference([tool], text),
                    f"sorting stdin {text[:40]!r}...")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_several_files_and_stdin(built, backend, tmp_path):
    """Each input's last line is a line of its own, newline or not; `-` is stdin."""
    tool = need("sort")
    program = built("sort")
    texts = [b"b\na", b"", b"c\nb\n", b"a\na", b"\n"]
    paths = []
    for k, text in enumerate(texts):
        path = tmp_path / f"part{k}"
        path.write_bytes(text)
        paths.append(str(path))
    for args, stdin in ([paths, b""], [[paths[0], "-", paths[0]], b"z\ny"],
                        [["-", paths[2]], b"q"], [paths[:1] * 3, b""]):
        assert_same(program.run(backend, args, stdin), reference([tool, *args], stdin),
                    f"sort {' '.join(args)}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_is_stable_for_equal_lines(built, backend):
    """Equal lines are equal bytes, so stability shows only as agreement; a large run of
    duplicates among distinct lines exercises the merge's tie rule."""
    tool = need("sort")
    rng = random.Random(11)
    lines = [rng.choice([b"same", b"same", b"other", b"sam", b"samf"]) for _ in range(3000)]
    text = b"\n".join(lines) + b"\n"
    assert_same(built("sort").run(backend, [], text), reference([tool], text), "duplicates")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_unreadable_file(built, backend, tmp_path):
    """Status 2 and the exact message; later files are still read, nothing is written."""
    need("sort")
    program = built("sort")
    good = tmp_path / "good.txt"
    good.write_bytes(b"b\na\n")
    missing = tmp_path / "nope" / "missing.txt"
    run = program.run(backend, [str(missing)])
    assert run.exit_status == 2, ended(run)
    assert run.stderr == f"sort: cannot read: {missing}\n".encode()
    assert run.stdout == b""
    run = program.run(backend, [str(good), str(missing), str(tmp_path), str(good)])
    assert run.exit_status == 2, ended(run)
    assert run.stderr == (f"sort: cannot read: {missing}\n"
                          f"sort: cannot read: {tmp_path}\n").encode()
    assert run.stdout == b""
    ref = reference(["sort", str(missing)])
    assert ref.returncode == 2


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_three_hundred_thousand_lines(built, backend, tmp_path):
    tool = need("sort")
    rng = random.Random(300)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    text = b"\n".join(random_lines(rng, 300_000, alphabet, 50)) + b"\n"
    path = tmp_path / "big.txt"
    path.write_bytes(text)
    assert_same(built("sort").run(backend, [str(path)]), reference([tool, str(path)]),
                "300,000 lines")


# ------------------------------------------------------------------------------ serve


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_exchange(port: int, request: bytes, done: threading.Event,
                  deadline: float) -> bytes | None:
    """Connect (retrying while the server starts), send, and read the reply to its end."""
    while time.monotonic() < deadline and not done.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                conn.sendall(request)
                chunks = []
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                return b"".join(chunks)
        except (ConnectionRefusedError, ConnectionResetError):
            time.sleep(0.02)
    return None


def serve_once(program: Built, backend: str, request: bytes) -> tuple[process.RunResult, bytes]:
    """Start the server on a free port, send one request, return its run and the reply.
    A port taken between choosing and binding (status 2) is retried with another."""
    for _ in range(3):
        port = free_port()
        result: dict = {}

        def run_server() -> None:
            result["run"] = program.run(backend, [str(port)],
                                        limits=process.RunLimits(timeout=20.0))

        done = threading.Event()
        server = threading.Thread(target=lambda: (run_server(), done.set()), daemon=True)
        server.start()
        reply = http_exchange(port, request, done, time.monotonic() + 15)
        server.join(25)
        assert not server.is_alive(), "the server did not exit after one request"
        run = result["run"]
        if run.exit_status == 2 and reply is None:
            continue
        assert reply is not None, f"no reply; the server ended with {ended(run)}"
        return run, reply
    pytest.fail("could not find a free port in three tries")


def parse_reply(reply: bytes) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *header_lines = head.split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in header_lines)
    return status, headers, body


@pytest.mark.parametrize("backend", BACKENDS)
def test_serve_answers_health(built, backend):
    run, reply = serve_once(built("serve"), backend,
                            b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert run.exit_status == 0, ended(run)
    assert run.stdout == b"" and run.stderr == b""
    status, headers, body = parse_reply(reply)
    assert status == b"HTTP/1.1 200 OK"
    assert body == b'{"ok":true}'
    assert headers == {b"Content-Length": b"11", b"Connection": b"close",
                       b"Content-Type": b"application/json"}
    assert int(headers[b"Content-Length"]) == len(body)
    assert reply == (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\n\r\n{\"ok\":true}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("request_line", [
    b"GET /nope HTTP/1.1\r\n\r\n", b"GET /healthy HTTP/1.1\r\n\r\n", b"POST /health HTTP/1.1\r\n\r\n",
    b"GET /health\r\n",
], ids=["other-path", "longer-path", "post", "no-version"])
def test_serve_answers_404_otherwise(built, backend, request_line):
    run, reply = serve_once(built("serve"), backend, request_line)
    assert run.exit_status == 0, ended(run)
    status, headers, body = parse_reply(reply)
    assert status == b"HTTP/1.1 404 Not Found"
    assert body == b'{"error":"not found"}'
    assert headers[b"Content-Length"] == str(len(body)).encode() == b"21"
    assert headers[b"Connection"] == b"close"
    assert headers[b"Content-Type"] == b"application/json"


@pytest.mark.parametrize("backend", BACKENDS)
def test_serve_request_in_pieces(built, backend):
    """The request line arrives over several reads; the server waits for the newline."""
    program = built("serve")
    port = free_port()
    result: dict = {}
    server = threading.Thread(target=lambda: result.setdefault(
        "run", program.run(backend, [str(port)], limits=process.RunLimits(timeout=20.0))))
    server.start()
    deadline = time.monotonic() + 15
    conn = None
    while conn is None and time.monotonic() < deadline:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        except ConnectionRefusedError:
            time.sleep(0.02)
    assert conn is not None, "the server never listened"
    with conn:
        for piece in (b"GET /he", b"alth HT", b"TP/1.0\r\n"):
            conn.sendall(piece)
            time.sleep(0.05)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    server.join(25)
    assert result["run"].exit_status == 0
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b'{"ok":true}')


@pytest.mark.parametrize("backend", BACKENDS)
def test_serve_exit_statuses(built, backend):
    """No port: 4. A port another socket listens on: 2. Silent either way."""
    program = built("serve")
    run = program.run(backend, [])
    assert run.exit_status == 4 and run.stdout == b"" and run.stderr == b""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run = program.run(backend, [str(port)])
    assert run.exit_status == 2 and run.stdout == b"" and run.stderr == b""


# ------------------------------------------------------------------------------ cut

CUT_LISTS = ["1", "2", "3", "7", "1,3", "3,1", "2,2", "2-", "-2", "1-3", "1-", "2-3,5-",
             "1,4-", "-1,3-", "2-2", "1-2,2-3"]


def delimited_text(rng: random.Random, delimiter: bytes, lines: int) -> bytes:
    alphabet = b"ab c\t" + delimiter
    rows = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
            for _ in range(lines)]
    return b"\n".join(rows) + rng.choice([b"", b"\n"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_cut_fields_like_coreutils(built, backend):
    tool = need("cut")
    program = built("cut")
    rng = random.Random(5)
    for k in range(40):
        delimiter = rng.choice([b",", b":", b"\t", b" "])
        text = delimited_text(rng, delimiter, rng.randint(0, 30))
        args = ["-f", rng.choice(CUT_LISTS)]
        if delimiter != b"\t" or rng.random() < 0.5:
            args = ["-d", delimiter.decode()] + args
        if rng.random() < 0.3:
            args.append("-s")
        assert_same(program.run(backend, args, text), reference([tool, *args], text),
                    f"cut {args} on {text[:40]!r}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [
    ["-d,", "-f2"], ["-f2", "-d,"], ["-d,", "-f1,3"], ["-d", ",", "-f2"], ["-d,", "-f", "2"],
    ["--delimiter=,", "--fields=2"], ["--delimiter", ",", "--fields", "2"], ["-d,", "-f2", "--"],
    ["-sd,", "-f2"], ["-d,", "--only-delimited", "-f1"],
], ids=lambda a: " ".join(a))
def test_cut_spellings_like_coreutils(built, backend, args):
    tool = need("cut")
    text = b"a,b,c\nno delimiter\n,,\nx,y\n"
    assert_same(built("cut").run(backend, args, text), reference([tool, *args], text),
                " ".join(args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cut_files_like_coreutils(built, backend, tmp_path):
    tool = need("cut")
    (tmp_path / "a").write_bytes(b"1:2:3\n4:5")
    (tmp_path / "b").write_bytes(b"x:y\n")
    for args, stdin in ([["-d:", "-f2", "a", "b"], b""], [["-d:", "-f1", "b", "-", "a"], b"p:q"],
                        [["-d:", "-f", "3", "a"], b""]):
        paths = [str(tmp_path / a) if a in ("a", "b") else a for a in args]
        assert_same(built("cut").run(backend, paths, stdin), reference([tool, *paths], stdin),
                    " ".join(args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [
    ["-d,", "-fx"], ["-d,", "-f0"], ["-d,"], ["-d", "ab", "-f1"], ["-f", "3-2"], ["-f", "1,,2"],
    ["-f", "-"], ["-f", ""], ["-x", "-f1"], ["-f1", "/nonexistent/file"],
], ids=lambda a: " ".join(a) or "none")
def test_cut_refusals_like_coreutils(built, backend, args):
    """Same status as GNU and a message on stderr (wording differs where GNU names errno)."""
    tool = need("cut")
    text = b"a,b,c\n"
    run = built("cut").run(backend, args, text)
    ref = reference([tool, *args], text)
    assert run.exit_status == ref.returncode == 1, f"{args}: {ended(run)}"
    assert run.stderr.startswith(b"cut: ")
    assert run.stdout == ref.stdout


def test_cut_bad_list_message_is_gnus(built):
    """`cut: invalid field value 'x'`: GNU's wording under the C locale."""
    tool = need("cut")
    run = built("cut").run("exe", ["-d,", "-fx"], b"")
    ref = reference([tool, "-d,", "-fx"], b"", name="cut")
    assert run.stderr == ref.stderr.splitlines(keepends=True)[0]
