"""scripts/run_fixtures.py, on a small fixture tree this test writes (no shared folder needed).

The tree has one fixture of each verdict the harness can reach: an accept fixture that passes
(stdin echoed, stderr and exit status checked), one whose stdout differs, a reject fixture whose
first rule is its RULE, and one whose RULE is not ours. The script's JSON table and its
`--list-failures` reasons must say exactly that.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "run_fixtures.py"

ECHO = """\
{header}
fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in {{
        var c = getchar(i);
        while c >= 0 {{
            putchar(i, c);
            c = getchar(i);
        }}
        write_err(i, "done\\n");
    }}
    release(io);
    return 3;
}}
"""

REFUSED = """\
{header}
fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args);
    let x: int = "hi";
    return 0;
}}
"""

FIXTURES = {
    "cancho/tests/accept/echo_pass.cho": ECHO.format(header="""\
//~ STDIN first line
//~ STDIN second
//~ STDOUT first line
//~ STDOUT second
//~ STDERR done
//~ EXIT 3"""),
    "cancho/tests/accept/echo_wrong_stdout.cho": ECHO.format(header="""\
//~ STDIN first line
//~ STDOUT another line
//~ STDERR done
//~ EXIT 3"""),
    "cancho/tests/reject/rule_matches.cho": REFUSED.format(header="""\
edition 1;
//~ ERROR expected `int`
//~ RULE type-mismatch"""),
    "cancho/tests/reject/rule_differs.cho": REFUSED.format(header="""\
edition 1;
//~ ERROR expected `int`
//~ RULE unknown-name"""),
    # an older copy, only run with --older
    "lex-sys/tests/reject/old_without_rule.ls": REFUSED.format(header="//~ ERROR expected `int`"),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixtures")
    for name, text in FIXTURES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600)


def row(table: list[dict], label: str) -> dict:
    return next(r for r in table if r["label"] == label)


@pytest.fixture(scope="module")
def both(tree: Path) -> dict:
    done = run_script(str(tree), "--backend", "both", "--json")
    assert done.returncode == 1, done.stderr  # two fixtures fail
    return json.loads(done.stdout)


def test_table_by_edition_and_backend(both: dict) -> None:
    current = both["table"]["current"]
    assert [r["label"] for r in current] == ["none", "1", "all"]
    assert row(current, "none") == {"label": "none", "total": 2,
                                    "passed": {"jit": 1, "exe": 1}, "agree": 2}
    assert row(current, "1") == {"label": "1", "total": 2,
                                 "passed": {"jit": 1, "exe": 1}, "agree": 2}
    assert row(current, "all")["total"] == 4
    assert "older" not in both["table"]


def test_verdicts_and_reasons(both: dict) -> None:
    by = {(o["name"].split("/")[-1], o["backend"]): o for o in both["outcomes"]}
    for backend in ("jit", "exe"):
        assert by[("echo_pass.cho", backend)]["passed"], by[("echo_pass.cho", backend)]
        wrong = by[("echo_wrong_stdout.cho", backend)]
        assert not wrong["passed"]
        assert wrong["reason"] == "stdout line 1: got 'first line', expected 'another line'"
        assert by[("rule_matches.cho", backend)]["passed"]
        differs = by[("rule_differs.cho", backend)]
        assert not differs["passed"]
        assert differs["reason"].startswith(
            "first rule type-mismatch, expected unknown-name: rule_differs.cho:7:18: error:")


def test_list_failures_and_one_backend(tree: Path, tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    done = run_script(str(tree), "--backend", "jit", "--list-failures", "--filter", "accept",
                      "--json-file", str(saved))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "current fixtures"
    assert lines[1].split() == ["edition", "total", "jit", "pass", "jit", "fail"]
    assert lines[-2].split() == ["all", "2", "1", "1"]
    assert lines[-1] == ("FAIL current cancho/tests/accept/echo_wrong_stdout.cho: "
                         "stdout line 1: got 'first line', expected 'another line'")
    data = json.loads(saved.read_text())
    assert row(data["table"]["current"], "all") == {"label": "all", "total": 2,
                                                    "passed": {"jit": 1}, "agree": 2}


def test_older_copies_and_missing_rule(tree: Path) -> None:
    done = run_script(str(tree), "--backend", "exe", "--older", "--filter", "reject", "--json")
    data = json.loads(done.stdout)
    assert row(data["table"]["older"], "all") == {"label": "all", "total": 1,
                                                  "passed": {"exe": 1}, "agree": 1}
    assert row(data["table"]["current"], "all")["passed"] == {"exe": 1}


def test_environment_variable_and_missing_folder(tree: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANCHO_REFERENCE_FIXTURES", str(tree))
    done = run_script("--backend", "jit", "--filter", "rule_matches", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["fixtures"] == str(tree.resolve())
    missing = run_script(str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert "no fixtures at" in missing.stderr


def test_a_program_that_never_ends_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "cancho/tests/accept/forever.cho"
    path.parent.mkdir(parents=True)
    path.write_text("""\
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    var c = 0;
    borrow mut io as &!i in {
        c = getchar(i);
        while c < 1000 {
            c = getchar(i);
        }
    }
    release(io);
    return 0;
}
""")
    done = run_script(str(tmp_path), "--backend", "exe", "--timeout", "3", "--list-failures")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "FAIL current cancho/tests/accept/forever.cho: timed out after 3 s")


def test_blockers_count_each_failing_fixture_once(tree: Path) -> None:
    done = run_script(str(tree), "--backend", "both", "--blockers")
    tail = done.stdout.splitlines()[-2:]
    assert [line.split(None, 2) for line in tail] == [
        ["1", "current", "first rule"], ["1", "current", "output"]]


def test_blocker_names_what_our_refusal_cites() -> None:
    spec = importlib.util.spec_from_file_location("run_fixtures", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_fixtures"] = module
    spec.loader.exec_module(module)

    def label(reason: str) -> str:
        return module.blocker(module.Outcome("x.cho", module.Suite.CURRENT, module.Kind.ACCEPT,
                                             None, "jit", False, reason))

    assert label("refused: x.cho:1:2: error: the builtin `spawn` is not supported by "
                 "cancho-kernel [unsupported-on-target]") == "builtin `spawn` (unsupported here)"
    assert label("refused: x.cho:1:1: error: no module `std.dirs` in this program "
                 "[module-not-imported]") == "module `std.dirs`"
    assert label("check exits 2: unknown option `--target`") == "option `--target`"
    assert label("no ERROR 'x' in: x.cho:3:4: error: y [type-mismatch]") == (
        "message wording (an ERROR fragment)")
    assert label("exit 3, expected 0: cancho: killed") == "other"
    # A wrong first rule is the blocker, unless that rule says the builtin is missing here.
    assert label("first rule module-not-imported, expected unknown-name: x.cho:1:1: error: "
                 "no module `a` in this program [module-not-imported]") == "first rule"
    assert label("first rule unsupported-on-target, expected effect-not-declared: x.cho:1:1: "
                 "error: the builtin `exec_spawn` is not supported by cancho-kernel "
                 "[unsupported-on-target]") == "builtin `exec_spawn` (unsupported here)"
