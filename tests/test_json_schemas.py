"""The published JSON Schemas (``cancho_kernel/schemas/``) describe what the commands print.

``check --output json`` is validated over the whole conformance corpus (every accept and reject
fixture of ours, so every rule's refusal shape is seen), through the same renderer the CLI uses, and
once through the command itself; ``authority --output json`` over the examples and test programs.
A schema that stopped matching its output, or an output that grew a field the schema does not
know, fails here (the schemas forbid unknown fields).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from cancho_kernel.compiler import api  # noqa: E402
from cancho_kernel.compiler.authority import authority_report  # noqa: E402
from cancho_kernel.compiler.diagnostics import RULES, render_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "tests" / "conformance").rglob("*.cho"))
# A program is a directory of example files (compiled together, as tests/test_examples.py does) or
# one test program.
PROGRAMS = [*(sorted(d.glob("*.cho")) for d in sorted((ROOT / "examples").iterdir()) if d.is_dir()),
            *([p] for p in sorted((ROOT / "examples").glob("*.cho"))),
            *([p] for p in sorted((ROOT / "tests" / "programs").glob("*.cho")))]


@lru_cache(maxsize=None)
def validator(name: str) -> "jsonschema.protocols.Validator":
    schema = json.loads(resources.files("cancho_kernel.schemas").joinpath(f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_the_schemas_are_valid_and_shipped_as_package_data():
    for name in ("check", "authority"):
        assert validator(name).schema["$schema"].endswith("2020-12/schema")


def test_check_json_of_the_whole_corpus_matches_its_schema():
    assert len(CORPUS) > 300
    seen_rules: set[str] = set()
    for path in CORPUS:
        result = api.check_sources(api.load_sources([path]))
        doc = json.loads(render_json(list(result.diagnostics)))
        validator("check").validate(doc)
        seen_rules |= {r["rule"] for r in doc["refused"]}
    assert seen_rules <= set(RULES)
    assert len(seen_rules) > 40  # the corpus reaches most rules, so most shapes are validated


def test_the_schema_refuses_what_the_command_never_prints():
    v = validator("check")
    bad = [{"refused": [{"rule": "Type Mismatch", "message": "m", "explanation": "e", "position": None}]},
           {"refused": [{"rule": "type-mismatch", "message": "m", "explanation": "e",
                         "position": {"file": "f", "line": 0, "column": 1}}]},
           {"refused": [], "extra": 1}]
    for doc in bad:
        assert not v.is_valid(doc), doc


def test_check_json_from_the_command(tmp_path):
    bad = tmp_path / "bad.cho"
    bad.write_text('fn main(world: World) -> [] int {\n    let x: int = "no";\n    return 0;\n}\n')
    out = subprocess.run([sys.executable, "-c", "import sys; from cancho_kernel.cli import main; sys.exit(main())",
                          "check", "--output", "json", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    validator("check").validate(doc)
    assert doc["refused"][0]["position"]["line"] == 2


@pytest.mark.parametrize("paths", PROGRAMS, ids=lambda ps: str(ps[0].parent.relative_to(ROOT) / ps[0].stem))
def test_authority_json_matches_its_schema(paths):
    result = api.compile_sources(api.load_sources(paths))
    if result.diagnostics:
        pytest.fail(f"{paths[0]} is refused: {result.diagnostics[0].message}")
    doc = json.loads(authority_report(result.program).to_json())
    validator("authority").validate(doc)
    assert doc["effects"] == sorted({label["name"] for label in doc["labels"]})
