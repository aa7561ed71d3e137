"""The conformance corpus: cancho programs whose expected behaviour is written inside them.

Layout (language.md §9):

* ``tests/conformance/accept/*.cho`` must compile, then run on **both** backends (a linked
  executable and the MCJIT worker) with the ``STDIN`` lines on stdin; stdout, stderr and the exit
  status must match the ``STDOUT``/``STDERR``/``EXIT`` directives, and the two backends must
  agree byte for byte.
* ``tests/conformance/reject/*.cho`` must be refused; the first diagnostic carries the ``RULE``
  tag, every ``ERROR`` substring occurs in the human-readable output, and the JSON document
  parses and locates the refusal in this file.
* ``examples/*.cho`` (top level only) run like accept fixtures and must declare ``STDOUT``.

Directive semantics (§9): a directive is a line that, once trimmed, starts with
``"//~ " + KEY + " "``; the rest of the line is the value. ``STDOUT``/``STDERR`` values are
joined with ``\\n`` plus a final ``\\n`` when there is at least one; ``STDERR`` is checked even
when absent (then stderr must be empty); ``EXIT`` defaults to 0; each ``STDIN`` value is fed with
a trailing ``\\n`` and stdin is then closed (no ``STDIN``: an immediately closed stdin).

Status convention of this corpus: the status compared is the exit status, or 128 + the signal
for a process killed by one (what a shell shows), and ``EXIT 132`` additionally demands that the
process died of SIGILL — a trap — rather than returning 132.
"""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, diagnostics
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.target import HOST, parse_target

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPUS = TESTS / "conformance"
ACCEPT = sorted((CORPUS / "accept").glob("*.cho"))
REJECT = sorted((CORPUS / "reject").glob("*.cho"))
EXAMPLES = sorted((REPO / "examples").glob("*.cho"))

KEYS = ("STDIN", "STDOUT", "STDERR", "EXIT", "ERROR", "RULE", "TARGET")
RUN_KEYS = {"STDIN", "STDOUT", "STDERR", "EXIT"}
REJECT_KEYS = {"ERROR", "RULE", "TARGET"}

# Rules refused without a source position (program-level refusals).
UNLOCATED_RULES = {"program-shape"}

# Every rule of the first slice must be pinned by at least two reject fixtures.
REQUIRED_RULES = (
    "unexpected-character", "literal-form", "unknown-escape", "literal-out-of-range",
    "unknown-edition", "type-mismatch", "program-shape", "unknown-name", "not-a-function",
    "arity-mismatch", "assign-to-immutable", "operator-type-mismatch", "not-a-slice",
    "shared-reference-written", "linear-value-unconsumed", "linear-use-after-move",
    "borrow-conflict", "effect-not-declared", "effect-declared-not-performed", "constant-traps",
    "region-not-in-scope", "reference-escapes-region", "missing-return", "unreachable-statement",
    "builtin-redeclared", "duplicate-declaration", "capability-misused", "pattern-shape",
    "unsized-type",
)

TRAP_STATUS = 128 + signal.SIGILL
RUN_TIMEOUT = 10.0


# ------------------------------------------------------------------------- directives


def directives(path: Path) -> dict[str, list[str]]:
    """Every directive of a fixture, by key, in file order."""
    found: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        for key in KEYS:
            prefix = f"//~ {key} "
            if line.startswith(prefix):
                found.setdefault(key, []).append(line[len(prefix):])
                break
    return found


def joined(values: list[str]) -> bytes:
    """STDOUT/STDERR values as the bytes the program must write."""
    if not values:
        return b""
    return ("\n".join(values) + "\n").encode("utf-8")


def stdin_bytes(values: list[str]) -> bytes:
    return "".join(v + "\n" for v in values).encode("utf-8")


def expected_status(d: dict[str, list[str]]) -> int:
    values = d.get("EXIT", [])
    return int(values[-1]) if values else 0


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


# ------------------------------------------------------------------------- backends


@pytest.fixture(scope="module")
def jit_worker():
    """One MCJIT worker for the whole module (starting one costs an interpreter and LLVM)."""
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield worker
    worker.close()


def status_of(run) -> int | None:
    """The status a shell would show: the exit status, or 128 + the killing signal."""
    if run.exit_status is not None:
        return run.exit_status
    if run.signal is not None:
        return 128 + run.signal
    return None


def describe(run) -> str:
    if getattr(run, "timed_out", False):
        return "timed out"
    if run.signal is not None:
        return f"killed by signal {run.signal}"
    return f"exit status {run.exit_status}"


def run_both(ir: str, name: str, stdin: bytes, jit_worker, tmp_path: Path) -> dict:
    """Build and run on the exe backend, run on the jit backend; the same argv for both."""
    from cancho_kernel.compiler.backends import exe, process

    limits = process.RunLimits(timeout=RUN_TIMEOUT)
    binary = tmp_path / name
    exe.build_executable(ir, binary)
    argv = [name]
    return {
        "exe": process.run_executable(binary, argv, stdin, process.StdoutTarget.pipe(), limits),
        "jit": jit_worker.run(ir, argv, stdin, process.StdoutTarget.pipe(), limits),
    }


def check_run_fixture(path: Path, jit_worker, tmp_path: Path) -> None:
    d = directives(path)
    compiled = api.compile_sources(api.load_sources([path]))
    assert compiled.ok, (
        f"{path} must compile, but was refused:\n" + diagnostics.render_text(compiled.diagnostics))
    want_out = joined(d.get("STDOUT", []))
    want_err = joined(d.get("STDERR", []))
    want_status = expected_status(d)
    runs = run_both(compiled.ir, path.stem, stdin_bytes(d.get("STDIN", [])), jit_worker, tmp_path)

    problems: list[str] = []
    for backend, run in runs.items():
        if getattr(run, "timed_out", False):
            problems.append(f"[{backend}] timed out after {RUN_TIMEOUT} s")
            continue
        if run.stdout != want_out:
            problems.append(f"[{backend}] stdout {run.stdout!r}, expected {want_out!r}")
        if run.stderr != want_err:
            problems.append(f"[{backend}] stderr {run.stderr!r}, expected {want_err!r}")
        got = status_of(run)
        if got != want_status:
            problems.append(f"[{backend}] {describe(run)} (status {got}), expected {want_status}")
        elif want_status == TRAP_STATUS and run.signal != signal.SIGILL:
            problems.append(f"[{backend}] {describe(run)}: EXIT 132 means death by SIGILL (a trap)")
    a, b = runs["exe"], runs["jit"]
    if (a.stdout, a.stderr, status_of(a)) != (b.stdout, b.stderr, status_of(b)):
        problems.append(
            "the backends disagree:\n"
            f"  exe: stdout {a.stdout!r} stderr {a.stderr!r} {describe(a)}\n"
            f"  jit: stdout {b.stdout!r} stderr {b.stderr!r} {describe(b)}")
    assert not problems, f"{path}:\n" + "\n".join(problems)


# ------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("path", ACCEPT, ids=_id)
def test_accept(path: Path, jit_worker, tmp_path: Path) -> None:
    check_run_fixture(path, jit_worker, tmp_path)


@pytest.mark.parametrize("path", EXAMPLES, ids=_id)
def test_example(path: Path, jit_worker, tmp_path: Path) -> None:
    assert directives(path).get("STDOUT"), f"{path}: an example must declare at least one STDOUT"
    check_run_fixture(path, jit_worker, tmp_path)


@pytest.mark.parametrize("path", REJECT, ids=_id)
def test_reject(path: Path) -> None:
    d = directives(path)
    (rule,) = d["RULE"]
    target = HOST
    if d.get("TARGET"):  # refused for that target only: the host never says so
        (name,) = d["TARGET"]
        target = parse_target(name, native.host_triple())
        host = diagnostics.render_text(api.check_sources(api.load_sources([path])).diagnostics)
        for needle in d.get("ERROR", []):
            assert needle not in host, f"{path}: the host refuses it for `{name}`'s reason:\n{host}"
    result = api.check_sources(api.load_sources([path]), target=target)
    assert not result.ok, f"{path} must be refused with `{rule}`, but was accepted"
    text = diagnostics.render_text(result.diagnostics)
    first = result.diagnostics[0]
    assert first.rule == rule, (
        f"{path}: first refusal is `{first.rule}`, expected `{rule}`; all of them:\n{text}")
    for needle in d.get("ERROR", []):
        assert needle in text, f"{path}: {needle!r} does not occur in the diagnostics:\n{text}"

    doc = json.loads(diagnostics.render_json(result.diagnostics))
    refused = doc["refused"]
    assert refused and refused[0]["rule"] == rule
    for item in refused:
        assert set(item) >= {"rule", "message", "explanation", "position"}
        assert item["rule"] in diagnostics.RULES
    position = refused[0]["position"]
    if rule in UNLOCATED_RULES:
        return
    assert position is not None, f"{path}: a `{rule}` refusal must say where it is"
    assert position["file"] == str(path)
    assert position["line"] >= 1 and position["column"] >= 1
    assert f"{path}:" in text, f"{path}: the text form must name the file:\n{text}"


# ------------------------------------------------------------------------- the corpus itself


def test_corpus_is_not_empty() -> None:
    assert len(ACCEPT) >= 40
    assert len(REJECT) >= 2 * len(REQUIRED_RULES)
    assert (REPO / "examples" / "hello.cho") in EXAMPLES


def test_every_required_rule_has_two_reject_fixtures() -> None:
    counts = Counter(directives(p)["RULE"][0] for p in REJECT if directives(p).get("RULE"))
    short = {rule: counts[rule] for rule in REQUIRED_RULES if counts[rule] < 2}
    assert not short, f"rules with fewer than two reject fixtures: {short}"


_DIRECTIVE_LINE = re.compile(r"^//~ (?P<key>[A-Z]+) (?P<value>.*)$")


@pytest.mark.parametrize("path", ACCEPT + EXAMPLES + REJECT, ids=_id)
def test_fixture_directives_are_well_formed(path: Path) -> None:
    """Catches typos: every `//~` line is a known directive with a value, used in the right place."""
    keys: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line.startswith("//~"):
            continue
        m = _DIRECTIVE_LINE.match(line)
        assert m and m["key"] in KEYS, f"{path}:{number}: not a directive: {raw!r}"
        keys.append(m["key"])
    d = directives(path)
    if path in REJECT:
        assert keys.count("RULE") == 1, f"{path}: a reject fixture has exactly one RULE"
        assert d["RULE"][0] in diagnostics.RULES, f"{path}: unknown rule {d['RULE'][0]!r}"
        assert not set(keys) & RUN_KEYS, f"{path}: run directives in a reject fixture"
    else:
        assert not set(keys) & REJECT_KEYS, f"{path}: reject directives in a run fixture"
        assert keys.count("EXIT") <= 1
        for value in d.get("EXIT", []):
            assert value.isdigit() and 0 <= int(value) <= 255, f"{path}: EXIT {value!r}"


def test_directive_parsing() -> None:
    """The §9 joining rules, on a synthetic fixture."""
    import tempfile

    text = (
        "  //~ STDOUT  two spaces\n//~ STDOUT last\n//~STDOUT ignored\n"
        "//~ STDIN 1\n//~ STDIN x y\n// //~ EXIT 9 is not a directive\n"
        "fn main(world: World) -> [] int { release(world); return 0; } //~ EXIT 3\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t.cho"
        p.write_text(text)
        d = directives(p)
    assert joined(d["STDOUT"]) == b" two spaces\nlast\n"
    assert stdin_bytes(d["STDIN"]) == b"1\nx y\n"
    assert joined(d.get("STDERR", [])) == b""
    assert expected_status(d) == 0
