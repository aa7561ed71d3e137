"""The one word catalogue behind cancho highlighting, derived from the compiler's own catalogues.

Both highlighters read it: the Pygments lexer (``pygments_lexer.py``, used by nbconvert) imports
it directly, and the JupyterLab extension loads ``labextension/prebuilt/static/words.json`` when the
language is first used (it is data beside the bundle, not part of it), which
``python -m cancho_kernel.highlight_words --write`` generates from it: no node build is needed
for a new word. Deriving the words from
the lexer's ``KEYWORDS`` and the checker's prelude tables means a new keyword, builtin or prelude
type reaches both highlighters without a second list to keep in step.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .compiler.check.builtins import BUILTIN_EDITION, CAPABILITY_KINDS, PRELUDE_TYPE_EDITION
from .compiler.lexer import KEYWORDS

__all__ = ["WordClass", "Catalogue", "catalogue", "catalogue_json", "WORDS_JSON", "REGENERATE"]


class WordClass(enum.Enum):
    """How a word is shown; the value is the key used in ``words.json``."""

    KEYWORD = "keyword"          # reserved words (lexer KEYWORDS) other than the ones below
    CONSTANT = "constant"        # `true`, `false`
    MODE = "mode"                # the declaration modes `res`, `val`
    CONTEXTUAL = "contextual"    # `edition`, `static`: keywords only where an item starts
    TYPE = "type"                # scalar and non-capability prelude types (int, File, Box, ...)
    CAPABILITY = "capability"    # prelude capability types (World, Io, Fs, Ffi, ...)
    BUILTIN = "builtin"          # builtin functions of every edition, and the alloc forms


# Words the reserved-word list has that are values or modes rather than plain keywords.
_CONSTANTS = frozenset({"true", "false"})
_MODES = frozenset({"res", "val"})
# Contextual words the parser recognises by spelling (parser/items.py: `edition`, `static`).
_CONTEXTUAL = frozenset({"edition", "static"})
# Builtin forms that take a region in brackets, recognised by the parser (parser/exprs.py).
_ALLOC_FORMS = frozenset({"alloc", "alloc_slice"})

# Where the generated copy for the JupyterLab extension lives, and how to regenerate it.
WORDS_JSON = Path(__file__).resolve().parent.parent / "labextension" / "prebuilt" / "static" / "words.json"
REGENERATE = "python -m cancho_kernel.highlight_words --write"


@dataclass(frozen=True)
class Catalogue:
    """Words by class; every word is in exactly one class."""

    classes: Mapping[WordClass, tuple[str, ...]]

    def class_of(self, word: str) -> WordClass | None:
        """The class of a catalogued word, or None for an ordinary identifier."""
        for cls, words in self.classes.items():
            if word in words:
                return cls
        return None

    def as_json_obj(self) -> dict[str, list[str]]:
        """The catalogue as ``{class value: sorted words}``, the shape of ``words.json``."""
        return {cls.value: list(words) for cls, words in self.classes.items()}


def catalogue() -> Catalogue:
    """Build the catalogue from the compiler's tables (cheap; no global state kept)."""
    prelude = set(PRELUDE_TYPE_EDITION)
    capabilities = set(CAPABILITY_KINDS) & prelude
    classes = {
        WordClass.KEYWORD: set(KEYWORDS) - _CONSTANTS - _MODES,
        WordClass.CONSTANT: set(KEYWORDS) & _CONSTANTS,
        WordClass.MODE: set(KEYWORDS) & _MODES,
        WordClass.CONTEXTUAL: set(_CONTEXTUAL),
        WordClass.TYPE: prelude - capabilities,
        WordClass.CAPABILITY: capabilities,
        WordClass.BUILTIN: set(BUILTIN_EDITION) | _ALLOC_FORMS,
    }
    seen: dict[str, WordClass] = {}
    for cls, words in classes.items():
        for w in words:
            if w in seen:
                raise ValueError(f"`{w}` is both {seen[w].value} and {cls.value}")
            seen[w] = cls
    return Catalogue(MappingProxyType({cls: tuple(sorted(ws)) for cls, ws in classes.items()}))


def catalogue_json() -> str:
    """The exact text ``words.json`` must hold (stable order, trailing newline)."""
    return json.dumps(catalogue().as_json_obj(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write or check ``labextension/prebuilt/static/words.json``."""
    ap = argparse.ArgumentParser(prog="python -m cancho_kernel.highlight_words", description=__doc__)
    ap.add_argument("--write", action="store_true", help="write labextension/prebuilt/static/words.json")
    ap.add_argument("--check", action="store_true", help="exit 1 if words.json is stale")
    args = ap.parse_args(argv)
    text = catalogue_json()
    if args.write:
        WORDS_JSON.write_text(text, encoding="utf-8")
        print(f"wrote {WORDS_JSON} (reinstall the package to ship it: pip install .)")
        return 0
    if args.check:
        current = WORDS_JSON.read_text(encoding="utf-8") if WORDS_JSON.exists() else ""
        if current != text:
            print(f"{WORDS_JSON} is stale; run: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
