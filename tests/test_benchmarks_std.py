"""benchmarks/std_json_map.py: std.json and std.map against Python's json and dict.

One quick end-to-end run: the cancho program is built, its compact JSON is compared byte for
byte with Python's (a mismatch exits 1), and the table has its three rows with positive times.
No time is compared with a threshold; the full run is ``python -m benchmarks.std_json_map``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks import std_json_map

ROW = re.compile(r"^(json parse\+serialise|map inserts|map lookups) \(.*?\)\s+"
                 r"([\d.]+) \[([\d.]+)–([\d.]+)\]\s+([\d.]+) \[([\d.]+)–([\d.]+)\]\s+([\d.]+)x", re.M)


def test_the_generated_document_is_deterministic_and_round_trips() -> None:
    doc = std_json_map.make_document(20)
    assert doc == std_json_map.make_document(20)
    compact = std_json_map.python_round_trip(doc)
    assert json.loads(compact) == json.loads(doc)
    assert b"\\u" in doc and "é".encode() in compact  # escaped in, raw out


def test_quick_run_reports_every_row(tmp_path: Path) -> None:
    lines: list[str] = []
    out = tmp_path / "rows.json"
    code = std_json_map.main(["--quick", "--runs", "1", "--json", str(out)], out=lines.append)
    text = "\n".join(lines)
    assert code == 0, text
    rows = {m.group(1): m for m in ROW.finditer(text)}
    assert set(rows) == {"json parse+serialise", "map inserts", "map lookups"}, text
    for m in rows.values():
        assert float(m.group(2)) > 0 and float(m.group(5)) > 0
    saved = json.loads(out.read_text())
    assert saved["schema"] == "cancho-std-json-map/1"
    assert [r["name"].split(" (")[0] for r in saved["rows"]] == [
        "json parse+serialise", "map inserts", "map lookups"]
    assert saved["facts"]["map_keys"] == std_json_map.QUICK.map_keys
