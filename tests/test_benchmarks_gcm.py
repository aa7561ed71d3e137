"""benchmarks/gcm_openssl.py: std.gcm's two paths against OpenSSL in one run.

One quick run end to end: the program is built, both paths' sealed records are compared byte for
byte with OpenSSL's before anything is timed (a mismatch fails the run), and the table has its
rows with positive rates. No time is compared with a threshold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import gcm_openssl

pytest.importorskip("cryptography")
ROW = re.compile(r"^(hw|sw) (\d+) B\s+([\d.]+) \[([\d.]+)–([\d.]+)\]\s+([\d.]+) \[([\d.]+)–([\d.]+)\]\s+([\d.]+)x", re.M)


def test_quick_run_checks_bytes_and_reports_every_row(tmp_path: Path) -> None:
    lines: list[str] = []
    out = tmp_path / "rows.json"
    code = gcm_openssl.main(["--quick", "--runs", "1", "--json", str(out)], out=lines.append)
    text = "\n".join(lines)
    assert code == 0, text
    rows = [(m.group(1), int(m.group(2))) for m in ROW.finditer(text)]
    assert rows == [("hw", 64), ("hw", 16384), ("sw", 16384)], text
    for m in ROW.finditer(text):
        assert float(m.group(3)) > 0 and float(m.group(6)) > 0
    saved = json.loads(out.read_text())
    assert saved["schema"] == "cancho-gcm-openssl/1"
    assert [r["name"] for r in saved["rows"]] == ["hw 64 B", "hw 16384 B", "sw 16384 B"]


def test_a_wrong_seal_fails_the_run(tmp_path: Path, monkeypatch) -> None:
    """The byte check is real: a plaintext that differs from what the program seals fails it."""
    monkeypatch.setattr(gcm_openssl, "plaintext", lambda size: bytes(size))
    lines: list[str] = []
    assert gcm_openssl.main(["--quick", "--runs", "1"], out=lines.append) == 1
    assert "unlike OpenSSL" in "\n".join(lines)
