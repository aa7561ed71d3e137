"""Diagnostics: the one way every pass reports a refusal.

A refusal carries a stable rule tag (`Rule`: the reference's catalogue), a message that says what to change,
a fixed one-sentence explanation per rule, and a span (or none, for program-level refusals).

The command line's text form ends the headline with the rule tag, the way `cc` ends a warning
with its flag: `path:line:col: error: message [rule-tag]` (docs/cli.md). The kernel shows the tag
on a line of its own, so `render` leaves it out unless asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from .source import Span


class Rule(StrEnum):
    """The rule a refusal enforces. The value is the stable tag printed by `check`, JSON output and
    `%%refused`; `explanation` is the one fixed sentence shown with every refusal of the rule."""

    AMBIGUOUS_TYPE = "ambiguous-type"
    ARITY_MISMATCH = "arity-mismatch"
    ASSIGN_TO_IMMUTABLE = "assign-to-immutable"
    BORROW_CONFLICT = "borrow-conflict"
    BUILTIN_REDECLARED = "builtin-redeclared"
    CAPABILITY_MISUSED = "capability-misused"
    CAPABILITY_NOT_NARROWABLE = "capability-not-narrowable"
    CONSTANT_TRAPS = "constant-traps"
    DUPLICATE_DECLARATION = "duplicate-declaration"
    EFFECT_DECLARED_NOT_PERFORMED = "effect-declared-not-performed"
    EFFECT_NOT_DECLARED = "effect-not-declared"
    ENUM_HAS_NO_VARIANTS = "enum-has-no-variants"
    FIELD_ORDER = "field-order"
    FOREIGN_BOUNDARY_TYPE = "foreign-boundary-type"
    FOREIGN_DECLARATION = "foreign-declaration"
    FOREIGN_SCOPE = "foreign-scope"
    INFINITE_TYPE = "infinite-type"
    INTERNAL = "internal"
    LINEAR_USE_AFTER_MOVE = "linear-use-after-move"
    LINEAR_VALUE_TAKEN_APART = "linear-value-taken-apart"
    LINEAR_VALUE_UNCONSUMED = "linear-value-unconsumed"
    LITERAL_FORM = "literal-form"
    LITERAL_OUT_OF_RANGE = "literal-out-of-range"
    MATCH_ARM_UNREACHABLE = "match-arm-unreachable"
    MATCH_NOT_EXHAUSTIVE = "match-not-exhaustive"
    MATCH_ON_A_NON_ENUM = "match-on-a-non-enum"
    MISSING_FIELD = "missing-field"
    MISSING_RETURN = "missing-return"
    MODE_BOUND_VIOLATED = "mode-bound-violated"
    MODULE_NOT_IMPORTED = "module-not-imported"
    NO_FUNCTION_VALUES = "no-function-values"
    NOT_A_FUNCTION = "not-a-function"
    NOT_A_PLACE = "not-a-place"
    NOT_A_REFERENCE = "not-a-reference"
    NOT_A_SLICE = "not-a-slice"
    NOT_A_STRUCT = "not-a-struct"
    NOT_A_TUPLE = "not-a-tuple"
    NOT_AN_ENUM = "not-an-enum"
    NOT_PUBLIC = "not-public"
    OPERATOR_TYPE_MISMATCH = "operator-type-mismatch"
    PATTERN_SHAPE = "pattern-shape"
    PROGRAM_SHAPE = "program-shape"
    REFERENCE_ESCAPES_REGION = "reference-escapes-region"
    REGION_MISMATCH = "region-mismatch"
    REGION_NOT_IN_SCOPE = "region-not-in-scope"
    SHARED_REFERENCE_WRITTEN = "shared-reference-written"
    SIGNAL_NOT_CLAIMABLE = "signal-not-claimable"
    STATIC_ITEM = "static-item"
    THREAD_PAYLOAD_TYPE = "thread-payload-type"
    TYPE_ARGS_NOT_TAKEN = "type-args-not-taken"
    TYPE_MISMATCH = "type-mismatch"
    UNEXPECTED_CHARACTER = "unexpected-character"
    UNKNOWN_EDITION = "unknown-edition"
    UNKNOWN_ESCAPE = "unknown-escape"
    UNKNOWN_NAME = "unknown-name"
    UNREACHABLE_STATEMENT = "unreachable-statement"
    UNSAFE_IN_SAFE_MODE = "unsafe-in-safe-mode"
    UNSIZED_TYPE = "unsized-type"
    UNSUPPORTED_ON_TARGET = "unsupported-on-target"

    @property
    def explanation(self) -> str:
        return EXPLANATIONS[self]


# One fixed sentence per rule, written for this project.
EXPLANATIONS: dict[Rule, str] = {
    Rule.AMBIGUOUS_TYPE: "A generic call's type arguments are inferred from its arguments only, and these do not determine one of them.",
    Rule.ARITY_MISMATCH: "The number of arguments, payloads or bindings differs from what the declaration takes.",
    Rule.ASSIGN_TO_IMMUTABLE: "A `let` binding never changes; declare it with `var` to assign to it.",
    Rule.BORROW_CONFLICT: "A borrowed binding is frozen (shared) or locked (unique) until its borrow block ends.",
    Rule.BUILTIN_REDECLARED: "Prelude names visible at a file's edition belong to the language and cannot be declared again.",
    Rule.CAPABILITY_MISUSED: "A capability can only be held, lent by borrowing, narrowed or released; it has no literal and cannot be taken apart.",
    Rule.CAPABILITY_NOT_NARROWABLE: "Narrowing takes an owned capability and a literal that strictly extends its scope.",
    Rule.CONSTANT_TRAPS: "Every operand is known at compile time, so this operation can only trap when it runs.",
    Rule.DUPLICATE_DECLARATION: "A name may be introduced only once in one scope.",
    Rule.EFFECT_DECLARED_NOT_PERFORMED: "A function's row is exact: a label it declares must be performed by its body.",
    Rule.EFFECT_NOT_DECLARED: "A function's row is exact: every label its body performs must be declared or discharged by an owned capability.",
    Rule.ENUM_HAS_NO_VARIANTS: "An enum needs at least one variant.",
    Rule.FIELD_ORDER: "Struct literal fields are evaluated in declaration order, so they must be written in that order.",
    Rule.FOREIGN_BOUNDARY_TYPE: "Only int, bool, c_ptr, borrowed capabilities and byte slices cross into C; results are int, bool, c_ptr or c_int.",
    Rule.FOREIGN_DECLARATION: "A foreign function borrows exactly one Ffi capability, has no type parameters and names a symbol once.",
    Rule.FOREIGN_SCOPE: "An Ffi scope is a comma-separated list of distinct library names made of letters, digits, `_`, `.`, `+` and `-`.",
    Rule.INFINITE_TYPE: "A type may contain itself only through a Box.",
    Rule.INTERNAL: "The compiler itself failed; this is a bug in cancho-kernel, not in the program.",
    Rule.LINEAR_USE_AFTER_MOVE: "A res value was already consumed, so it cannot be used or borrowed again.",
    Rule.LINEAR_VALUE_TAKEN_APART: "A field cannot be read out of an owned res value; destructure the whole value instead.",
    Rule.LINEAR_VALUE_UNCONSUMED: "A res value must be consumed exactly once on every path; it cannot be dropped, overwritten or left behind.",
    Rule.LITERAL_FORM: "This literal is not written in a form the language accepts.",
    Rule.LITERAL_OUT_OF_RANGE: "This literal's value does not fit its type.",
    Rule.MATCH_ARM_UNREACHABLE: "An arm after a catch-all, or a variant matched twice, can never run.",
    Rule.MATCH_NOT_EXHAUSTIVE: "A match must cover every variant of the enum or end with `_`.",
    Rule.MATCH_ON_A_NON_ENUM: "Only an enum value, or a reference to one, can be matched.",
    Rule.MISSING_FIELD: "A struct literal must give every field of the struct.",
    Rule.MISSING_RETURN: "Every path through a function must end in `return`.",
    Rule.MODE_BOUND_VIOLATED: "A res type was used where only val (copyable) types are allowed.",
    Rule.MODULE_NOT_IMPORTED: "A qualifier must name a module imported by this module.",
    Rule.NO_FUNCTION_VALUES: "Only top-level, non-generic functions written in cancho can be used as values.",
    Rule.NOT_A_FUNCTION: "Only functions, foreign functions, builtins and locals of function type can be called.",
    Rule.NOT_A_PLACE: "Only a var binding, a field or element reached through a unique reference, or `*r` can be assigned.",
    Rule.NOT_A_REFERENCE: "Only a reference can be dereferenced.",
    Rule.NOT_A_SLICE: "Only a slice reference can be indexed or sliced.",
    Rule.NOT_A_STRUCT: "Field access, struct literals and struct patterns need a struct.",
    Rule.NOT_A_TUPLE: "Tuple indexing and tuple destructuring need a tuple.",
    Rule.NOT_AN_ENUM: "Variant syntax `X::V` needs an enum.",
    Rule.NOT_PUBLIC: "Another module's items are reachable only when declared `pub`.",
    Rule.OPERATOR_TYPE_MISMATCH: "This operator is not defined for these operand types.",
    Rule.PATTERN_SHAPE: "This pattern or tuple shape is not one the language allows.",
    Rule.PROGRAM_SHAPE: "A program has exactly one `fn main(world: World) -> [] int`, and `module` comes first in its file.",
    Rule.REFERENCE_ESCAPES_REGION: "A reference cannot outlive the region (borrow block, arena or region parameter) it points into.",
    Rule.REGION_MISMATCH: "These regions must agree, or this position does not take a region.",
    Rule.REGION_NOT_IN_SCOPE: "A region must be a region parameter, an open borrow or arena block, or `static`.",
    Rule.SHARED_REFERENCE_WRITTEN: "A shared reference, a string literal, a static or an argument is read-only.",
    Rule.SIGNAL_NOT_CLAIMABLE: "Only ALRM, HUP, INT, QUIT, TERM, USR1, USR2 and WINCH can be claimed, named without `SIG`, each once.",
    Rule.STATIC_ITEM: "A static is a slice of scalars computed at compile time by a body that performs nothing.",
    Rule.THREAD_PAYLOAD_TYPE: "What crosses to a thread, and back from it, is one pointer-width value: a scalar other than float, a non-slice reference, a function value, an owned File or a leafless capability.",
    Rule.TYPE_ARGS_NOT_TAKEN: "A type parameter takes no type arguments.",
    Rule.TYPE_MISMATCH: "The types disagree.",
    Rule.UNEXPECTED_CHARACTER: "This character starts no token of the language.",
    Rule.UNKNOWN_EDITION: "The only editions are 1 through 8.",
    Rule.UNKNOWN_ESCAPE: "Only the escapes \\n \\r \\t \\\\ \\0 and \\\" (or \\' in a character literal) exist.",
    Rule.UNKNOWN_NAME: "This name is not in scope here.",
    Rule.UNREACHABLE_STATEMENT: "A statement after one that always leaves the block can never run.",
    Rule.UNSAFE_IN_SAFE_MODE: "Safe mode (a shared server's policy, not a rule of the language) runs foreign code and other programs only inside its sandbox; where the sandbox is unavailable it refuses what nothing would bound: a reachable `extern fn`, a linked library, an `Exec` (docs/teaching.md).",
    Rule.UNSIZED_TYPE: "A slice `[T]` has no size; it can only be used behind a reference.",
    Rule.UNSUPPORTED_ON_TARGET: "This feature is not available on the selected target: a `wasm32-wasip1` build refuses what WASI lacks (threads, sockets, processes, ...), and cancho-kernel does not implement every builtin of every edition.",
}

RULES: tuple[str, ...] = tuple(sorted(r.value for r in Rule))
assert set(EXPLANATIONS) == set(Rule)


@dataclass
class Diagnostic:
    """A refusal: rule tag, message, location (None for program-level), fixed explanation."""

    rule: Rule
    message: str
    span: Span | None = None
    explanation: str = field(default="")
    # A fallback file name for program-level refusals, used only when rendering text.
    file_hint: str | None = None

    def __post_init__(self) -> None:
        try:
            self.rule = Rule(self.rule)  # a caller outside the compiler may still pass the tag's text
        except ValueError:
            raise ValueError(f"unknown rule tag {self.rule!r}") from None
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

    def __init__(self, rule: Rule, message: str, span: Span | None):
        super().__init__(message)
        self.diagnostic = Diagnostic(rule, message, span)
