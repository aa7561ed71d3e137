"""Highlighting: one word catalogue behind the Pygments lexer and the JupyterLab extension.

The catalogue (``cancho_kernel.highlight_words``) is derived from the compiler's tables; the
Pygments lexer must class every word as the catalogue says, and the extension's generated
``words.json`` (data the prebuilt bundle loads, not code in it) must hold the catalogue as it is
now — so adding a builtin without regenerating it fails here, naming the command (no node build).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import nbformat
import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename, get_lexer_for_mimetype
from pygments.lexers.c_cpp import CLexer
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String

from cancho_kernel import highlight_words
from cancho_kernel.compiler.check.builtins import BUILTIN_EDITION, CAPABILITY_KINDS, PRELUDE_TYPE_EDITION
from cancho_kernel.compiler.lexer import KEYWORDS
from cancho_kernel.highlight_words import REGENERATE, WordClass, catalogue, catalogue_json
from cancho_kernel.pygments_lexer import DIRECTIVE, WORD_TOKEN, CanchoLexer, split_header

ROOT = Path(__file__).resolve().parent.parent
LABEXT = ROOT / "labextension"
PREBUILT = LABEXT / "prebuilt"


def tokens(text: str) -> list[tuple[object, str]]:
    """Non-blank (token, text) pairs of `text`."""
    return [(t, v) for t, v in CanchoLexer().get_tokens(text) if v.strip()]


# -- the catalogue ---------------------------------------------------------------------------------


def test_catalogue_covers_the_compiler_tables_once():
    cat = catalogue()
    classed = [w for ws in cat.classes.values() for w in ws]
    assert len(classed) == len(set(classed)), "a word is in two classes"
    assert set(KEYWORDS) <= set(classed)
    assert set(BUILTIN_EDITION) <= set(cat.classes[WordClass.BUILTIN])
    assert set(PRELUDE_TYPE_EDITION) <= set(cat.classes[WordClass.TYPE]) | set(cat.classes[WordClass.CAPABILITY])
    assert set(cat.classes[WordClass.CAPABILITY]) == set(CAPABILITY_KINDS) & set(PRELUDE_TYPE_EDITION)
    assert {"World", "Io", "Fs", "Ffi"} <= set(cat.classes[WordClass.CAPABILITY])
    assert {"int", "byte", "File"} <= set(cat.classes[WordClass.TYPE])
    assert cat.class_of("fn") is WordClass.KEYWORD and cat.class_of("fnord") is None


# -- the Pygments lexer agrees with the catalogue ------------------------------------------------


@pytest.mark.parametrize("cls", [c for c in WordClass if c is not WordClass.CONTEXTUAL])
def test_pygments_classes_every_word_as_the_catalogue(cls):
    wrong = {}
    for word in catalogue().classes[cls]:
        toks = tokens(f"{word}\n")
        if toks != [(WORD_TOKEN[cls], word)]:
            wrong[word] = toks
    assert not wrong, f"{cls.value} words lexed otherwise: {wrong}"


def test_pygments_contextual_words_only_where_an_item_starts():
    contextual = WORD_TOKEN[WordClass.CONTEXTUAL]
    assert set(catalogue().classes[WordClass.CONTEXTUAL]) == {"edition", "static"}
    assert tokens("edition 8;\n")[0] == (contextual, "edition")
    assert tokens("pub static table: [int] { 1 }\n")[:3] == [(Keyword, "pub"), (contextual, "static"),
                                                            (Name.Constant, "table")]
    # Elsewhere they are ordinary identifiers, and `&static` is a region.
    assert (Name, "edition") in tokens("let edition = 1;\n")
    assert (Name.Label, "&static") in tokens("fn f(x: &static [byte]) -> [] int { return 0; }\n")


def test_pygments_ordinary_words_and_near_misses():
    assert tokens("fnord Worldly int8 _x\n") == [(Name, "fnord"), (Name.Class, "Worldly"), (Name, "int8"),
                                                  (Name, "_x")]


def test_pygments_effect_rows_regions_and_literals():
    toks = tokens('fn greet[&i](io: &!i Io) -> [io_write, fs_read("/tmp")] int {\n'
                  "    region a { let c: byte = 'z'; let n = alloc[a](0x1F) + t.0.1 + 1.5e3f32; }\n"
                  '    return write_bytes(io, "hi\\n"); // done\n}\n')
    assert (Name.Function, "greet") in toks
    assert (Name.Label, "&i") in toks and (Name.Label, "&!i") in toks
    assert (Name.Attribute, "io_write") in toks and (Name.Attribute, "fs_read") in toks
    assert (Name.Label, "a") in toks and toks.count((Name.Label, "a")) == 2  # `region a`, `alloc[a]`
    assert (String.Char, "'z'") in toks and (String.Escape, "\\n") in toks
    assert (Number.Hex, "0x1F") in toks and (Number.Float, "1.5e3f32") in toks
    assert [v for t, v in toks if t is Number.Integer] == ["0", "1"]  # `t.0.1`: fields, not a float
    assert (Comment.Single, "// done") in toks
    # After the row closes, words are ordinary again.
    assert (Keyword.Type, "int") in toks


def test_pygments_lexer_is_registered_for_cells_and_files():
    assert isinstance(get_lexer_by_name("cancho"), CanchoLexer)
    assert isinstance(get_lexer_for_filename("x.cho"), CanchoLexer)
    assert isinstance(get_lexer_for_mimetype("text/x-cancho"), CanchoLexer)


@pytest.mark.parametrize("path", sorted(ROOT.glob("examples/**/*.cho")), ids=lambda p: p.name)
def test_pygments_lexes_examples_losslessly(path):
    text = path.read_text(encoding="utf-8")
    toks = list(CanchoLexer(stripnl=False, ensurenl=False).get_tokens_unprocessed(text))
    assert "".join(v for _, _, v in toks) == text
    assert [i for i, _, _ in toks] == sorted(i for i, _, _ in toks)
    assert not [v for _, t, v in toks if t in Error], "error tokens in a valid example"


# -- directive header and %%c cells --------------------------------------------------------------


def test_directive_line_is_one_token():
    toks = tokens("%%refused linear-use-after-move\nfn main(world: World) -> [] int { return 0; }\n")
    assert toks[0] == (DIRECTIVE, "%%refused linear-use-after-move")
    assert toks[1] == (Keyword, "fn")


def test_directive_header_lines_and_only_the_header():
    text = "\n# NBVAL_IGNORE_OUTPUT\n  %load lib.cho\n%%run --backend exe --args fn let\nlet x = 5\n% 2;\n"
    toks = tokens(text)
    assert toks[:3] == [(Comment.Special, "# NBVAL_IGNORE_OUTPUT"), (DIRECTIVE, "%load lib.cho"),
                        (DIRECTIVE, "%%run --backend exe --args fn let")]
    # A `%` line after the body started is the remainder operator, not a directive.
    assert (Operator, "%") in toks and all(t is not DIRECTIVE for t, _ in toks[3:])
    header = split_header(text)
    assert not header.is_c and text[header.body_start:].startswith("let x")


def test_c_cell_is_lexed_as_c():
    body = '#include <stdio.h>\nint main(void) { /* c */ printf("%d\\n", 42); return 0; }\n'
    text = "%load other.cho\n%%c base --run\n" + body
    got = list(CanchoLexer().get_tokens(text))
    assert [tv for tv in got[:4] if tv[1].strip()] == [(DIRECTIVE, "%load other.cho"), (DIRECTIVE, "%%c base --run")]
    assert got[4:] == list(CLexer().get_tokens(body))
    assert (Keyword.Type, "int") in got and (Comment.Multiline, "/* c */") in got
    assert split_header(text).is_c
    # `%%cat` or a C word in a cancho cell does not switch languages.
    assert not split_header("%%check\nint\n").is_c


# -- the JupyterLab extension holds the catalogue as it is now ----------------------------------


def test_words_json_is_current():
    current = highlight_words.WORDS_JSON.read_text(encoding="utf-8")
    assert json.loads(current) == catalogue().as_json_obj(), (
        f"labextension/prebuilt/static/words.json is stale against the compiler's catalogues; run: {REGENERATE}")
    assert current == catalogue_json(), f"words.json is not in generated form; run: {REGENERATE}"


def test_check_command_reports_a_stale_words_json(tmp_path, monkeypatch, capsys):
    assert highlight_words.main(["--check"]) == 0
    stale = tmp_path / "words.json"
    stale.write_text('{"keyword": ["fn"]}\n', encoding="utf-8")
    monkeypatch.setattr(highlight_words, "WORDS_JSON", stale)
    assert highlight_words.main(["--check"]) == 1
    assert REGENERATE in capsys.readouterr().err


def _prebuilt_meta() -> dict:
    return json.loads((PREBUILT / "package.json").read_text(encoding="utf-8"))


def test_bundle_loads_the_words_as_data_instead_of_embedding_them():
    """A new builtin needs no node build: the bundle fetches static/words.json beside it (the
    file test_words_json_is_current keeps current) and holds no copy of the catalogue."""
    load = PREBUILT / _prebuilt_meta()["jupyterlab"]["_build"]["load"]
    assert load.is_file(), f"{load} is missing; run: sh labextension/build.sh"
    bundle = "".join(js.read_text(encoding="utf-8") for js in sorted((PREBUILT / "static").glob("*.js")))
    assert '"keyword":[' not in bundle.replace(" ", ""), "the bundle embeds a word catalogue again"
    assert "words.json" in bundle and "fullLabextensionsUrl" in bundle
    assert highlight_words.WORDS_JSON.parent == PREBUILT / "static"


def test_prebuilt_extension_is_mapped_into_the_wheel():
    source_meta = json.loads((LABEXT / "package.json").read_text(encoding="utf-8"))
    meta = _prebuilt_meta()
    name = meta["name"]
    assert name == source_meta["name"] and meta["version"] == source_meta["version"]
    assert source_meta["jupyterlab"]["outputDir"] == "prebuilt"
    assert (PREBUILT / "static" / "style.js").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shared = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    target = f"share/jupyter/labextensions/{name}"
    assert shared["labextension/prebuilt"] == target
    assert shared["labextension/install.json"] == f"{target}/install.json"
    install = json.loads((LABEXT / "install.json").read_text(encoding="utf-8"))
    assert install["packageName"] == pyproject["project"]["name"]
    # The sdist must keep the prebuilt bundle (it is what a wheel built from the sdist ships).
    sdist = pyproject["tool"]["hatch"]["build"]["targets"].get("sdist", {})
    assert not any(str(p).startswith("labextension/prebuilt") for p in sdist.get("exclude", []))
    assert "prebuilt" not in (ROOT / ".gitignore").read_text(encoding="utf-8")


# -- the JupyterLab tokenizer and the Pygments lexer agree, character by character ----------------

# The kind of a character, from a Pygments token (most specific first) or a CodeMirror token name.
# Pygments shows both `res`/`val` and `edition`/`static` as Keyword.Declaration ("decl").
_PYGMENTS_KINDS = [
    (Comment.Preproc, "directive"), (Comment, "comment"), (String.Char, "char"), (String, "string"),
    (Number, "number"), (Keyword.Constant, "constant"), (Keyword.Declaration, "decl"),
    (Keyword.Type, "type"), (Keyword, "keyword"), (Name.Builtin.Pseudo, "capability"),
    (Name.Builtin, "builtin"), (Name.Attribute, "effect"), (Name.Label, "region"),
    (Name.Function, "fn-name"), (Name.Class, "class"), (Name.Constant, "static-name"),
    (Name, "name"), (Operator, "operator"),
]
_CODEMIRROR_KINDS = {
    "processingInstruction": "directive", "lineComment": "comment", "character": "char",
    "string": "string", "escape": "string", "number": "number", "bool": "constant",
    "modifier": "decl", "definitionKeyword": "decl", "typeName": "type", "keyword": "keyword",
    "typeName.special": "capability", "variableName.standard": "builtin",
    "attributeName": "effect", "labelName": "region", "variableName.function.definition": "fn-name",
    "typeName.definition": "class", "className": "class", "variableName.constant": "static-name",
    "variableName": "name", "operator": "operator", "punctuation": "plain", None: "plain",
}

_EDGE_CELLS = [
    "\n# NBVAL_IGNORE_OUTPUT\n  %load lib.cho\n%%refused linear-use-after-move\nlet x = a\n% 2;\n",
    "edition 8;\npub static table: [int] { 1 }\nstatic other: int { 2 }\nlet static = edition;\n",
    'fn greet[&i, &b](io: &!i Io, s: &b [byte]) -> [io_write, fs_read("/tmp")] int {\n'
    "    region a { let c: byte = '\\''; let n = alloc [a](0x1F) + t.0.1 + 1.5e3f32 + 2e-3; }\n"
    '    borrow x as &!r in { return write_bytes(io, "hi \\"x\\"\\n"); } // done\n'
    "    let f: fn(int) -> [] int = g; struct Point { x: int } enum E { A, B }\n"
    "    return a && &static == b || c..d => _; res val true false World Worldly Box\n}\n",
]


def _pygments_kinds(text: str) -> list[str]:
    kinds = ["plain"] * len(text)
    for index, token, value in CanchoLexer(stripnl=False, ensurenl=False).get_tokens_unprocessed(text):
        kind = next((k for t, k in _PYGMENTS_KINDS if token in t), "plain")
        kinds[index:index + len(value)] = [kind] * len(value)
    return kinds


def _corpus() -> list[str]:
    """Cells of the repository's cancho notebooks, the examples, and the edge cases above."""
    texts = list(_EDGE_CELLS)
    texts += [p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("examples/**/*.cho"))]
    for path in sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("tests/notebooks/*.ipynb")]):
        nb = nbformat.read(path, as_version=4)
        if nb.metadata.get("kernelspec", {}).get("name") == "cancho":
            texts += [c.source for c in nb.cells if c.cell_type == "code"]
    return texts


def _codemirror_tokens(texts: list[str]) -> list[list[tuple[int, int, str | None]]]:
    """Run the extension's tokenizer under node (CommonJS build into the ignored lib/cjs)."""
    assert shutil.which("node") is not None and (LABEXT / "node_modules" / "@codemirror" / "language").is_dir(), \
        "this check needs node and labextension/node_modules: cd labextension && npm ci"
    built = LABEXT / "lib" / "cjs" / "cancho.js"
    sources = [*(LABEXT / "src").iterdir(), LABEXT / "tsconfig.json"]
    if not built.exists() or max(p.stat().st_mtime for p in sources) > built.stat().st_mtime:
        subprocess.run(["npx", "tsc", "--module", "commonjs", "--outDir", "lib/cjs", "--composite", "false",
                        "--incremental", "false", "--declaration", "false"],
                       cwd=LABEXT, check=True, capture_output=True, timeout=240)
    done = subprocess.run(["node", "test/tokenize.cjs"], cwd=LABEXT, input=json.dumps(texts),
                          capture_output=True, text=True, check=True, timeout=240)
    return json.loads(done.stdout)


@pytest.mark.labdev
def test_codemirror_tokenizer_agrees_with_pygments():
    texts = _corpus()
    assert len(texts) > 50
    disagreements = []
    for text, toks in zip(texts, _codemirror_tokens(texts)):
        header = split_header(text)
        limit = header.body_start if header.is_c else len(text)  # C bodies: two different C lexers
        cm = ["plain"] * len(text)
        for start, end, token in toks:
            cm[start:end] = [_CODEMIRROR_KINDS.get(token, f"other {token}")] * (end - start)
        py = _pygments_kinds(text)
        for i in range(limit):
            if not text[i].isspace() and cm[i] != py[i]:
                line = text.count("\n", 0, i) + 1
                disagreements.append(f"line {line} {text.splitlines()[line - 1]!r} at {text[i]!r}: "
                                     f"codemirror {cm[i]}, pygments {py[i]}")
                break
    assert not disagreements, "\n".join(disagreements[:20])
