#!/usr/bin/env python3
"""Run the reference implementation's own fixtures through our `cancho` CLI (issue 14, item 5).

The fixtures stay outside the repository (docs/fixtures.md): this script reads them from a
folder given on the command line, the environment variable CANCHO_REFERENCE_FIXTURES, or
`../shared/reference-fixtures` beside the repository. It applies the reference's harness rules:

* accept fixtures and top-level examples are built with `--std` and run with every `//~ STDIN`
  line plus a newline on a pipe that is then closed; stdout must equal the `//~ STDOUT` lines
  joined by newlines plus a final newline (empty when there are none), stderr likewise with
  `//~ STDERR`, and the exit status must be `//~ EXIT` (default 0);
* reject fixtures: `check --std` exits 1, its stderr holds every `//~ ERROR` fragment and a
  `path:line:col:` location, and the first rule of `check --std --output json` is `//~ RULE`
  (mandatory in the current suite; older copies without one predate that harness).
  A `//~ TARGET t` line passes `--target t` to `check`; whatever our CLI answers is reported.

Accept fixtures run once per backend (`run --backend jit|exe`); a reject fixture is checked
once and its verdict counts for both backends, since `check` does not depend on one. The result
is a table by edition (pass, fail, total per backend, and how many verdicts the backends agree
on), optionally the first blocking reason of every failure, or the whole run as JSON.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = REPO_ROOT.parent / "shared" / "reference-fixtures"
ENV_FIXTURES = "CANCHO_REFERENCE_FIXTURES"
BACKENDS = ("jit", "exe")
EXPECT_LINE = re.compile(r"^//~ ([A-Z]+)(?: (.*))?$")
EDITION_LINE = re.compile(r"^\s*edition\s+(\d+)\s*;", re.M)
LOCATION = re.compile(r"^\S[^\n]*?:\d+:\d+: ", re.M)
HEADLINE = re.compile(r"^\S[^\n]*: error: [^\n]*$", re.M)
REASON_WIDTH = 160


class Kind(enum.StrEnum):
    """What the harness does with a fixture."""

    ACCEPT = "accept"
    REJECT = "reject"


class Suite(enum.StrEnum):
    """Which copy of the reference's fixtures a file belongs to."""

    CURRENT = "current"
    OLDER = "older"


@dataclass(frozen=True)
class Expectation:
    """The `//~ KEY value` lines of one fixture."""

    stdin: tuple[str, ...] = ()
    stdout: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()
    exit: int = 0
    errors: tuple[str, ...] = ()
    rule: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Fixture:
    """One file of the suite, with its expectations and edition (None: no `edition` line)."""

    path: Path
    name: str
    kind: Kind
    suite: Suite
    edition: int | None
    expect: Expectation


@dataclass(frozen=True)
class Outcome:
    """The verdict on one fixture under one backend; `reason` is the first blocker when failed."""

    name: str
    suite: Suite
    kind: Kind
    edition: int | None
    backend: str
    passed: bool
    reason: str = ""


@dataclass
class Row:
    """One line of the table: counts for one edition (or all) of one suite."""

    label: str
    total: int = 0
    passed: dict[str, int] = field(default_factory=dict)
    agree: int = 0


@dataclass(frozen=True)
class Options:
    """How to call our compiler."""

    command: tuple[str, ...]
    timeout: float
    env: dict[str, str]


def parse_expectation(text: str) -> Expectation:
    """Collect the `//~` lines; unknown keys are ignored, as the reference's harness does."""
    lists: dict[str, list[str]] = {"STDIN": [], "STDOUT": [], "STDERR": [], "ERROR": []}
    scalars: dict[str, str] = {}
    for line in text.splitlines():
        m = EXPECT_LINE.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2) or ""
        if key in lists:
            lists[key].append(value)
        elif key in ("EXIT", "RULE", "TARGET"):
            scalars[key] = value.strip()
    exit_text = scalars.get("EXIT", "0")
    return Expectation(
        stdin=tuple(lists["STDIN"]),
        stdout=tuple(lists["STDOUT"]),
        stderr=tuple(lists["STDERR"]),
        exit=int(exit_text) if exit_text.lstrip("-").isdigit() else 0,
        errors=tuple(lists["ERROR"]),
        rule=scalars.get("RULE") or None,
        target=scalars.get("TARGET") or None,
    )


def load_fixture(path: Path, root: Path, kind: Kind, suite: Suite) -> Fixture:
    """Read one fixture file (bytes decoded leniently: a fixture may test bad encodings)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    m = EDITION_LINE.search(text)
    return Fixture(path=path, name=str(path.relative_to(root)), kind=kind, suite=suite,
                   edition=int(m.group(1)) if m else None, expect=parse_expectation(text))


def discover(root: Path, older: bool) -> list[Fixture]:
    """The current suite (accept, reject, top-level examples) and, with `older`, the old copies."""
    found: list[Fixture] = []
    groups: list[tuple[Path, str, Kind, Suite]] = [
        (root / "cancho/tests/accept", "*.cho", Kind.ACCEPT, Suite.CURRENT),
        (root / "cancho/tests/reject", "*.cho", Kind.REJECT, Suite.CURRENT),
        (root / "cancho/examples", "*.cho", Kind.ACCEPT, Suite.CURRENT),
    ]
    if older:
        groups += [
            (root / "cancho/tests/accept", "*.ls", Kind.ACCEPT, Suite.OLDER),
            (root / "cancho/tests/reject", "*.ls", Kind.REJECT, Suite.OLDER),
        ]
        for ext in ("*.cho", "*.ls"):
            groups += [
                (root / "lex-sys/tests/accept", ext, Kind.ACCEPT, Suite.OLDER),
                (root / "lex-sys/tests/reject", ext, Kind.REJECT, Suite.OLDER),
            ]
    for folder, pattern, kind, suite in groups:
        if folder.is_dir():
            found += [load_fixture(p, root, kind, suite) for p in sorted(folder.glob(pattern))
                      if p.is_file()]
    return found


@dataclass(frozen=True)
class Completed:
    """What one command did; `timed_out` replaces the status when it had to be killed."""

    status: int
    stdout: str
    stderr: str
    timed_out: bool = False


def execute(argv: Sequence[str], stdin: str, options: Options, cwd: Path) -> Completed:
    """Run one command in its own process group, so a timeout kills the program it started too."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=options.env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin.encode(), timeout=options.timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return Completed(-1, out.decode(errors="replace"), err.decode(errors="replace"), True)
    return Completed(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def joined(lines: tuple[str, ...]) -> str:
    """The reference's expected stream: the lines joined by newlines plus one, or nothing."""
    return "".join(line + "\n" for line in lines)


def first_headline(stderr: str, status: int = 1, path: Path | None = None) -> str:
    """The first diagnostic line of a refusal (exit 1), else the first non-empty stderr line.

    The fixture's own path is shortened to its file name so reasons stay readable.
    """
    m = HEADLINE.search(stderr) if status == 1 else None
    line = m.group(0) if m else next((ln for ln in stderr.splitlines() if ln.strip()), "")
    return line.replace(str(path), path.name) if path is not None else line


def short(text: str) -> str:
    """One line, clipped, for a table of reasons."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[:REASON_WIDTH - 1] + "…"


def first_difference(label: str, got: str, want: str) -> str:
    """Where two streams first differ, as `stdout line N: got X, expected Y`."""
    got_lines, want_lines = got.split("\n"), want.split("\n")
    for i, (g, w) in enumerate(zip(got_lines, want_lines), start=1):
        if g != w:
            return f"{label} line {i}: got {g!r}, expected {w!r}"
    n = min(len(got_lines), len(want_lines))
    if len(got_lines) > n:
        return f"{label} has an extra line {n + 1}: {got_lines[n]!r}"
    return f"{label} lacks line {n + 1}: {want_lines[n]!r}"


def judge_accept(fixture: Fixture, backend: str, options: Options, cwd: Path) -> Outcome:
    """Build and run one program; compare stdout, stderr and status exactly."""
    want = fixture.expect
    argv = [*options.command, "run", "--std", "--backend", backend, str(fixture.path)]
    done = execute(argv, joined(want.stdin), options, cwd)

    def verdict(passed: bool, reason: str = "") -> Outcome:
        return Outcome(fixture.name, fixture.suite, fixture.kind, fixture.edition, backend,
                       passed, short(reason))

    if done.timed_out:
        return verdict(False, f"timed out after {options.timeout:g} s")
    want_out, want_err = joined(want.stdout), joined(want.stderr)
    if done.status != want.exit:
        said = first_headline(done.stderr, done.status, fixture.path) or "no stderr"
        if done.status == 1 and HEADLINE.search(done.stderr):
            return verdict(False, f"refused: {said}")
        return verdict(False, f"exit {done.status}, expected {want.exit}: {said}")
    if done.stdout != want_out:
        return verdict(False, first_difference("stdout", done.stdout, want_out))
    if done.stderr != want_err:
        return verdict(False, first_difference("stderr", done.stderr, want_err))
    return verdict(True)


def first_json_rule(stdout: str) -> str | None:
    """The first refusal's rule in `check --output json`, or None when there is none."""
    try:
        refused = json.loads(stdout).get("refused") or []
    except (json.JSONDecodeError, AttributeError):
        return None
    return refused[0].get("rule") if refused and isinstance(refused[0], dict) else None


def judge_reject(fixture: Fixture, options: Options, cwd: Path) -> Outcome:
    """`check` must exit 1 with every ERROR fragment, a location and the first rule RULE."""
    want = fixture.expect
    target = ["--target", want.target] if want.target else []
    base = [*options.command, "check", "--std", *target]

    def verdict(passed: bool, reason: str = "") -> Outcome:
        return Outcome(fixture.name, fixture.suite, fixture.kind, fixture.edition, "check",
                       passed, short(reason))

    text = execute([*base, str(fixture.path)], "", options, cwd)
    if text.timed_out:
        return verdict(False, f"timed out after {options.timeout:g} s")
    if text.status == 0:
        return verdict(False, "accepted (check exits 0)")
    if text.status != 1:
        return verdict(False, f"check exits {text.status}: "
                              f"{first_headline(text.stderr, text.status, fixture.path)}")
    missing = [frag for frag in want.errors if frag not in text.stderr]
    if missing:
        return verdict(False, f"no ERROR {missing[0]!r} in: {first_headline(text.stderr, 1, fixture.path)}")
    if not LOCATION.search(text.stderr):
        return verdict(False, f"no location in: {first_headline(text.stderr, 1, fixture.path)}")
    if want.rule is None:
        if fixture.suite is Suite.CURRENT:
            return verdict(False, "the fixture has no //~ RULE line (mandatory)")
        return verdict(True)
    data = execute([*base, "--output", "json", str(fixture.path)], "", options, cwd)
    if data.timed_out:
        return verdict(False, f"check --output json timed out after {options.timeout:g} s")
    rule = first_json_rule(data.stdout)
    if rule != want.rule:
        return verdict(False, f"first rule {rule}, expected {want.rule}: "
                              f"{first_headline(text.stderr, 1, fixture.path)}")
    return verdict(True)


def run_job(job: tuple[Fixture, str], options: Options) -> list[Outcome]:
    """One fixture under one backend (a reject fixture: one check, counted for each backend)."""
    fixture, backend = job
    with tempfile.TemporaryDirectory(prefix="cancho-fixture-") as tmp:
        if fixture.kind is Kind.ACCEPT:
            return [judge_accept(fixture, backend, options, Path(tmp))]
        return [judge_reject(fixture, options, Path(tmp))]


def run_all(fixtures: Sequence[Fixture], backends: Sequence[str], options: Options,
            workers: int) -> list[Outcome]:
    """Every job on a small pool; reject verdicts are copied to each backend afterwards."""
    jobs: list[tuple[Fixture, str]] = []
    for fixture in fixtures:
        if fixture.kind is Kind.ACCEPT:
            jobs += [(fixture, backend) for backend in backends]
        else:
            jobs.append((fixture, "check"))
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for result in pool.map(lambda job: run_job(job, options), jobs):
            for outcome in result:
                if outcome.backend == "check":
                    outcomes += [Outcome(outcome.name, outcome.suite, outcome.kind,
                                         outcome.edition, backend, outcome.passed,
                                         outcome.reason) for backend in backends]
                else:
                    outcomes.append(outcome)
    return outcomes


def edition_label(edition: int | None) -> str:
    return "none" if edition is None else str(edition)


def table(outcomes: Iterable[Outcome], backends: Sequence[str]) -> dict[str, list[Row]]:
    """Rows by edition for each suite, plus an `all` row; `agree` counts equal verdicts."""
    verdicts: dict[tuple[Suite, str], dict[str, Outcome]] = {}
    for outcome in outcomes:
        verdicts.setdefault((outcome.suite, outcome.name), {})[outcome.backend] = outcome
    tables: dict[str, list[Row]] = {}
    for suite in Suite:
        rows: dict[str, Row] = {}
        total = Row("all", passed={b: 0 for b in backends})
        for (s, _), by_backend in sorted(verdicts.items(), key=lambda kv: kv[0][1]):
            if s is not suite:
                continue
            some = next(iter(by_backend.values()))
            label = edition_label(some.edition)
            row = rows.setdefault(label, Row(label, passed={b: 0 for b in backends}))
            agree = len({by_backend[b].passed for b in backends if b in by_backend}) == 1
            for r in (row, total):
                r.total += 1
                r.agree += agree
                for b in backends:
                    r.passed[b] += by_backend.get(b) is not None and by_backend[b].passed
        if total.total:
            order = sorted(rows, key=lambda k: (k != "none", int(k) if k.isdigit() else 0))
            tables[suite.value] = [rows[k] for k in order] + [total]
    return tables


def render_table(tables: dict[str, list[Row]], backends: Sequence[str]) -> str:
    """The table as fixed-width text, one block per suite."""
    lines: list[str] = []
    head = ["edition", "total"]
    for b in backends:
        head += [f"{b} pass", f"{b} fail"]
    if len(backends) > 1:
        head.append("agree")
    for suite, rows in tables.items():
        lines.append(f"{suite} fixtures")
        lines.append("  ".join(f"{h:>9}" for h in head))
        for row in rows:
            cells = [row.label, str(row.total)]
            for b in backends:
                cells += [str(row.passed[b]), str(row.total - row.passed[b])]
            if len(backends) > 1:
                cells.append(str(row.agree))
            lines.append("  ".join(f"{c:>9}" for c in cells))
        lines.append("")
    return "\n".join(lines)


def render_failures(outcomes: Sequence[Outcome], backends: Sequence[str]) -> str:
    """Each failing fixture once, with its first blocking reason (per backend when they differ)."""
    by_name: dict[tuple[Suite, str], list[Outcome]] = {}
    for outcome in outcomes:
        by_name.setdefault((outcome.suite, outcome.name), []).append(outcome)
    lines = []
    for (suite, name), group in sorted(by_name.items()):
        failed = [o for o in group if not o.passed]
        if not failed:
            continue
        reasons = {o.reason for o in failed}
        if len(reasons) == 1 and len(failed) == len(backends):
            lines.append(f"FAIL {suite.value} {name}: {failed[0].reason}")
        else:
            lines += [f"FAIL {suite.value} {name} [{o.backend}]: {o.reason}" for o in failed]
    return "\n".join(lines) + ("\n" if lines else "")


BLOCKER_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"the builtin `([^`]+)` is not supported"), "builtin `{}` (unsupported here)"),
    (re.compile(r"the prelude type `([^`]+)` is not supported"), "type `{}` (unsupported here)"),
    (re.compile(r"`([^`]+)` is not a function in this program"), "builtin `{}` (unknown)"),
    (re.compile(r"unknown (?:capability )?type `([^`]+)`"), "type `{}` (unknown)"),
    (re.compile(r"no module `([^`]+)`"), "module `{}`"),
    (re.compile(r"unknown option `([^`]+)`"), "option `{}`"),
)


def blocker(outcome: Outcome) -> str:
    """What stops a failing fixture, coarsely: the missing name our refusal cites, else the
    kind of disagreement (an ERROR fragment, the first rule, the output, the status)."""
    if outcome.reason.startswith("first rule") and \
            not outcome.reason.startswith("first rule unsupported-on-target"):
        return "first rule"
    for pattern, label in BLOCKER_PATTERNS:
        m = pattern.search(outcome.reason)
        if m:
            return label.format(m.group(1))
    for prefix, label in (("no ERROR", "message wording (an ERROR fragment)"),
                          ("first rule", "first rule"), ("timed out", "timeout"),
                          ("stdout", "output"), ("stderr", "output"),
                          ("accepted", "accepted, should be refused"),
                          ("refused", "refused, should run")):
        if outcome.reason.startswith(prefix):
            return label
    return "other"


def render_blockers(outcomes: Sequence[Outcome]) -> str:
    """Failing fixtures counted by blocker (one count per fixture, whatever the backends)."""
    first: dict[tuple[Suite, str], str] = {}
    for outcome in outcomes:
        if not outcome.passed:
            first.setdefault((outcome.suite, outcome.name), blocker(outcome))
    counts: dict[tuple[Suite, str], int] = {}
    for (suite, _), label in first.items():
        counts[(suite, label)] = counts.get((suite, label), 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (kv[0][0].value, -kv[1], kv[0][1]))
    return "".join(f"{n:5}  {suite.value}  {label}\n" for (suite, label), n in ordered)


def fixtures_root(given: str | None) -> Path:
    """The command line's folder, else the environment's, else the shared folder."""
    return Path(given or os.environ.get(ENV_FIXTURES) or DEFAULT_FIXTURES).resolve()


def build_options(args: argparse.Namespace) -> Options:
    """Our compiler from this checkout (PYTHONPATH), unless `--cancho` names another command."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("CANCHO_SAFE", None)
    command = tuple(args.cancho.split()) if args.cancho else (
        sys.executable, "-m", "cancho_kernel.cli")
    return Options(command=command, timeout=args.timeout, env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixtures", nargs="?",
                        help=f"the fixtures folder (default: ${ENV_FIXTURES}, else "
                             "../shared/reference-fixtures beside the repository)")
    parser.add_argument("--backend", choices=("jit", "exe", "both"), default="both")
    parser.add_argument("--older", action="store_true",
                        help="also run the older copies (lex-sys/ and the .ls files)")
    parser.add_argument("--workers", type=int, default=2, help="parallel jobs (default 2)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds per command before it is killed (default 60)")
    parser.add_argument("--list-failures", action="store_true",
                        help="print every failing fixture with its first blocking reason")
    parser.add_argument("--blockers", action="store_true",
                        help="count the failing fixtures by what blocks them")
    parser.add_argument("--json", action="store_true", help="print the whole run as JSON")
    parser.add_argument("--json-file", default="",
                        help="also write the whole run as JSON to this file")
    parser.add_argument("--filter", default="",
                        help="only fixtures whose relative path contains this text")
    parser.add_argument("--cancho", default="",
                        help="the compiler command (default: python -m cancho_kernel.cli)")
    args = parser.parse_args(argv)

    root = fixtures_root(args.fixtures)
    if not (root / "cancho").is_dir():
        print(f"run_fixtures: no fixtures at {root} (expected {root / 'cancho'})",
              file=sys.stderr)
        return 2
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    fixtures = [f for f in discover(root, args.older) if args.filter in f.name]
    outcomes = run_all(fixtures, backends, build_options(args), args.workers)
    tables = table(outcomes, backends)
    report = {
        "fixtures": str(root),
        "backends": list(backends),
        "table": {suite: [asdict(row) for row in rows] for suite, rows in tables.items()},
        "outcomes": [{**asdict(o), "suite": o.suite.value, "kind": o.kind.value}
                     for o in outcomes],
    }
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(tables, backends))
        if args.list_failures:
            sys.stdout.write(render_failures(outcomes, backends))
        if args.blockers:
            sys.stdout.write(render_blockers(outcomes))
    failed = any(not o.passed for o in outcomes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
