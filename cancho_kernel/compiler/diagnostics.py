"""Diagnostics: the one way every pass reports a refusal.

A refusal carries a stable rule tag (the reference's 58 tags), a message that says what to change,
a fixed one-sentence explanation per rule, and a span (or none, for program-level refusals).

The command line's text form ends the headline with the rule tag, the way `cc` ends a warning
with its flag: `path:line:col: error: message [rule-tag]` (docs/cli.md). The kernel shows the tag
on a line of its own, so `render` leaves it out unless asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .source import Span

# One fixed sentence per rule, written for this project.
EXPLANATIONS: dict[str, str] = {
    "ambiguous-type": "A generic call's type arguments are inferred from its arguments only, and these do not determine one of them.",
    "arity-mismatch": "The number of arguments, payloads or bindings differs from what the declaration takes.",
    "assign-to-immutable": "A `let` binding never changes; declare it with `var` to assign to it.",
    "borrow-conflict": "A borrowed binding is frozen (shared) or locked (unique) until its borrow block ends.",
    "builtin-redeclared": "Prelude names visible at a file's edition belong to the language and cannot be declared again.",
    "capability-misused": "A capability can only be held, lent by borrowing, narrowed or released; it has no literal and cannot be taken apart.",
    "capability-not-narrowable": "Narrowing takes an owned capability and a literal that strictly extends its scope.",
    "constant-traps": "Every operand is known at compile time, so this operation can only trap when it runs.",
    "duplicate-declaration": "A name may be introduced only once in one scope.",
    "effect-declared-not-performed": "A function's row is exact: a label it declares must be performed by its body.",
    "effect-not-declared": "A function's row is exact: every label its body performs must be declared or discharged by an owned capability.",
    "enum-has-no-variants": "An enum needs at least one variant.",
    "field-order": "Struct literal fields are evaluated in declaration order, so they must be written in that order.",
    "foreign-boundary-type": "Only int, bool, c_ptr, borrowed capabilities and byte slices cross into C; results are int, bool, c_ptr or c_int.",
    "foreign-declaration": "A foreign function borrows exactly one Ffi capability, has no type parameters and names a symbol once.",
    "foreign-scope": "An Ffi scope is a comma-separated list of distinct library names made of letters, digits, `_`, `.`, `+` and `-`.",
    "infinite-type": "A type may contain itself only through a Box.",
    "internal": "The compiler itself failed; this is a bug in cancho-kernel, not in the program.",
    "linear-use-after-move": "A res value was already consumed, so it cannot be used or borrowed again.",
    "linear-value-taken-apart": "A field cannot be read out of an owned res value; destructure the whole value instead.",
    "linear-value-unconsumed": "A res value must be consumed exactly once on every path; it cannot be dropped, overwritten or left behind.",
    "literal-form": "This literal is not written in a form the language accepts.",
    "literal-out-of-range": "This literal's value does not fit its type.",
    "match-arm-unreachable": "An arm after a catch-all, or a variant matched twice, can never run.",
    "match-not-exhaustive": "A match must cover every variant of the enum or end with `_`.",
    "match-on-a-non-enum": "Only an enum value, or a reference to one, can be matched.",
    "missing-field": "A struct literal must give every field of the struct.",
    "missing-return": "Every path through a function must end in `return`.",
    "mode-bound-violated": "A res type was used where only val (copyable) types are allowed.",
    "module-not-imported": "A qualifier must name a module imported by this module.",
    "no-function-values": "Only top-level, non-generic functions written in cancho can be used as values.",
    "not-a-function": "Only functions, foreign functions, builtins and locals of function type can be called.",
    "not-a-place": "Only a var binding, a field or element reached through a unique reference, or `*r` can be assigned.",
    "not-a-reference": "Only a reference can be dereferenced.",
    "not-a-slice": "Only a slice reference can be indexed or sliced.",
    "not-a-struct": "Field access, struct literals and struct patterns need a struct.",
    "not-a-tuple": "Tuple indexing and tuple destructuring need a tuple.",
    "not-an-enum": "Variant syntax `X::V` needs an enum.",
    "not-public": "Another module's items are reachable only when declared `pub`.",
    "operator-type-mismatch": "This operator is not defined for these operand types.",
    "pattern-shape": "This pattern or tuple shape is not one the language allows.",
    "program-shape": "A program has exactly one `fn main(world: World) -> [] int`, and `module` comes first in its file.",
    "reference-escapes-region": "A reference cannot outlive the region (borrow block, arena or region parameter) it points into.",
    "region-mismatch": "These regions must agree, or this position does not take a region.",
    "region-not-in-scope": "A region must be a region parameter, an open borrow or arena block, or `static`.",
    "shared-reference-written": "A shared reference, a string literal, a static or an argument is read-only.",
    "signal-not-claimable": "This signal cannot be claimed by a program.",
    "static-item": "A static is a slice of scalars computed at compile time by a body that performs nothing.",
    "thread-payload-type": "A thread's payload and result must each be one pointer-width value.",
    "type-args-not-taken": "A type parameter takes no type arguments.",
    "type-mismatch": "The types disagree.",
    "unexpected-character": "This character starts no token of the language.",
    "unknown-edition": "The only editions are 1 through 8.",
    "unknown-escape": "Only the escapes \\n \\r \\t \\\\ \\0 and \\\" (or \\' in a character literal) exist.",
    "unknown-name": "This name is not in scope here.",
    "unreachable-statement": "A statement after one that always leaves the block can never run.",
    "unsized-type": "A slice `[T]` has no size; it can only be used behind a reference.",
    "unsupported-on-target": "This feature is not available on the selected target.",
}

RULES: tuple[str, ...] = tuple(sorted(EXPLANATIONS))
assert len(RULES) == 58


@dataclass
class Diagnostic:
    """A refusal: rule tag, message, location (None for program-level), fixed explanation."""

    rule: str
    message: str
    span: Span | None = None
    explanation: str = field(default="")
    # A fallback file name for program-level refusals, used only when rendering text.
    file_hint: str | None = None

    def __post_init__(self) -> None:
        if self.rule not in EXPLANATIONS:
            raise ValueError(f"unknown rule tag {self.rule!r}")
        if not self.explanation:
            self.explanation = EXPLANATIONS[self.rule]

    @property
    def sort_key(self) -> tuple:
        if self.span is None:
            return ("", -1, 0)
        return (self.span.source.path, self.span.line, self.span.column)

    def render(self, color: bool = False, rule_tag: bool = False) -> str:
        """Text form: `path:line:col: error: message`, the source line and a caret line.

        With `rule_tag`, the headline ends in ` [rule]`: after the message, so a tool that reads
        `path:line:col: error: ` (as it reads a C compiler's) still finds it unchanged.
        """
        red, bold, blue, reset = ("\x1b[31m", "\x1b[1m", "\x1b[34m", "\x1b[0m") if color else ("",) * 4
        tag = f" [{self.rule}]" if rule_tag else ""
        if self.span is None:
            prefix = f"{self.file_hint}: " if self.file_hint else ""
            return f"{bold}{prefix}{red}error{reset}{bold}: {self.message}{tag}{reset}"
        src = self.span.source
        line, col = src.line_col(self.span.start)
        end_line, end_col = src.line_col(max(self.span.start, self.span.end - 1))
        text = src.line_text(line)
        width = (end_col - col + 1) if end_line == line and self.span.end > self.span.start else 1
        width = max(1, min(width, max(1, len(text) - col + 1)))
        gutter = " " * len(str(line))
        return (
            f"{bold}{src.path}:{line}:{col}: {red}error{reset}{bold}: {self.message}{tag}{reset}\n"
            f"{blue}{gutter} |{reset}\n"
            f"{blue}{line} |{reset} {text}\n"
            f"{blue}{gutter} |{reset} {' ' * (col - 1)}{red}{'^' * width}{reset}"
        )

    def to_json_obj(self) -> dict:
        pos = None
        if self.span is not None:
            pos = {"file": self.span.source.path, "line": self.span.line, "column": self.span.column}
        return {"rule": self.rule, "message": self.message, "explanation": self.explanation, "position": pos}


class CompileError(Exception):
    """Raised by a pass that cannot go on; carries the diagnostics gathered so far."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


def sort_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Source order, program-level refusals first; stable for equal positions."""
    return sorted(diags, key=lambda d: d.sort_key)


def render_text(diags: list[Diagnostic], color: bool = False) -> str:
    """The command line's text form: every diagnostic with its rule tag, separated by blank
    lines, ending in a newline (empty string for none)."""
    if not diags:
        return ""
    return "\n\n".join(d.render(color, rule_tag=True) for d in diags) + "\n"


def _jstr(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def render_json(diags: list[Diagnostic]) -> str:
    """The `check --output json` document, formatted exactly as the reference prints it."""
    if not diags:
        return '{\n  "refused": []\n}\n'
    items = []
    for d in diags:
        if d.span is None:
            pos = "null"
        else:
            pos = f'{{ "file": {_jstr(d.span.source.path)}, "line": {d.span.line}, "column": {d.span.column} }}'
        items.append(
            "    {\n"
            f'      "rule": {_jstr(d.rule)},\n'
            f'      "message": {_jstr(d.message)},\n'
            f'      "explanation": {_jstr(d.explanation)},\n'
            f'      "position": {pos}\n'
            "    }"
        )
    return '{\n  "refused": [\n' + ",\n".join(items) + "\n  ]\n}\n"


class Refusal(Exception):
    """Raised inside a pass to refuse the declaration being checked with one diagnostic."""

    def __init__(self, rule: str, message: str, span: Span | None):
        super().__init__(message)
        self.diagnostic = Diagnostic(rule, message, span)
