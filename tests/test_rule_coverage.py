"""Every core rule of language.md §8 is demonstrated by at least two reject fixtures (not-public,
which needs two files, is covered by tests/test_modules.py), and every tag a fixture names is a
real rule tag."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from cancho_kernel.compiler.diagnostics import RULES

REJECT = Path(__file__).parent / "conformance" / "reject"

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
