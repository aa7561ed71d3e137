"""Every core rule of language.md §8 is demonstrated by at least two reject fixtures (not-public,
which needs two files, is covered by tests/test_modules.py), every tag a fixture names is a
real rule tag, every rule of the catalogue is emitted by the compiler and pinned by a fixture,
and docs/cli.md lists exactly the catalogue."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from cancho_kernel.compiler.diagnostics import EXPLANATIONS, RULES, Rule

ROOT = Path(__file__).resolve().parent.parent
REJECT = ROOT / "tests" / "conformance" / "reject"
COMPILER = ROOT / "cancho_kernel" / "compiler"
# `internal` is a bug of ours, which no fixture reaches on purpose; `not-public` needs two files
# (tests/test_modules.py); `unsafe-in-safe-mode` is a host's policy, not the language's
# (tests/test_safe_mode.py).
NO_FIXTURE = {Rule.INTERNAL, Rule.NOT_PUBLIC, Rule.UNSAFE_IN_SAFE_MODE}

CORE = """ambiguous-type arity-mismatch assign-to-immutable borrow-conflict builtin-redeclared
capability-misused capability-not-narrowable constant-traps duplicate-declaration
effect-declared-not-performed effect-not-declared field-order foreign-boundary-type
foreign-declaration linear-use-after-move linear-value-taken-apart linear-value-unconsumed
literal-form literal-out-of-range match-arm-unreachable match-not-exhaustive match-on-a-non-enum
missing-field missing-return mode-bound-violated module-not-imported not-a-function not-a-place
not-a-slice not-a-struct not-a-tuple not-an-enum operator-type-mismatch pattern-shape program-shape
reference-escapes-region region-not-in-scope shared-reference-written static-item type-mismatch
unexpected-character unknown-escape unknown-name unreachable-statement unsized-type""".split()


def fixture_rules() -> Counter:
    c: Counter = Counter()
    for f in REJECT.glob("*.cho"):
        m = re.search(r"^\s*//~ RULE (\S+)\s*$", f.read_text(encoding="utf-8"), re.M)
        assert m, f"{f.name} has no RULE directive"
        c[m.group(1)] += 1
    return c


def test_every_core_rule_has_two_fixtures():
    c = fixture_rules()
    thin = {r: c[r] for r in CORE if c[r] < 2}
    assert not thin, thin


def test_fixture_rules_are_real_tags():
    assert set(fixture_rules()) <= set(RULES)


def test_every_rule_is_emitted_by_the_compiler():
    """A tag no code path can produce is a dead entry in the catalogue: each member is named at a
    refusal site somewhere in the compiler (outside the catalogue itself)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in COMPILER.rglob("*.py") if p.name != "diagnostics.py")
    never = [r.value for r in Rule if not re.search(rf"\bRule\.{r.name}\b", text)]
    assert not never, never


def test_every_rule_has_a_fixture_and_an_explanation():
    c = fixture_rules()
    missing = [r.value for r in Rule if c[r.value] < 1 and r not in NO_FIXTURE]
    assert not missing, missing
    assert all(EXPLANATIONS[r].endswith(".") and r.explanation == EXPLANATIONS[r] for r in Rule)


def test_no_rule_tag_is_written_as_a_string_in_the_compiler():
    """Refusal sites name `Rule` members, so a misspelt tag is an AttributeError at import, not a
    ValueError on the one path that reaches it."""
    tags = "|".join(re.escape(r.value) for r in Rule)
    found = []
    for p in COMPILER.rglob("*.py"):
        if p.name == "diagnostics.py" or "backends" in p.parts:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(rf"[\"']({tags})[\"']", line) and "linkage" not in line:
                found.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_cli_doc_lists_exactly_the_catalogue():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("## Rule tags", 1)[1].split("\n## ", 1)[0]
    listed = {w for w in re.findall(r"`([a-z]+(?:-[a-z]+)*)`", text) if "-" in w or w in RULES}
    assert listed == set(RULES), (sorted(listed - set(RULES)), sorted(set(RULES) - listed))
