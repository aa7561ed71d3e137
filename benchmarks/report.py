"""Turning a result document into a plain table, a JSON file, and a schema check.

The table puts the measured medians next to the seed's figures (runtime.md §10.1) because the seed's
claims are ratios (1.25x backend gap, 11x per-call overhead, within 1.1x of fwrite); absolute
milliseconds from another machine and another backend are only context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .suite import SCHEMA


def _ms(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "-"
    return f"{summary['median']:.1f} ms ({summary['min']:.1f}-{summary['max']:.1f})"


def _side_cell(side: dict[str, Any]) -> str:
    timing = side.get("timing")
    if timing:
        return _ms(timing["wall_ms"])
    return "unavailable"


def _ratio_cell(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return "-"
    return f"{ratio['of_medians']:.2f}x ({ratio['paired_min']:.2f}-{ratio['paired_max']:.2f})"


def _ref_cell(ref: dict[str, Any]) -> str:
    def v(x: float | None) -> str:
        return "?" if x is None else f"{x:.1f}"

    r = ref.get("ratio")
    return f"{v(ref['cancho_median_ms'])} / {v(ref['c_median_ms'])} ms" + (
        f" = {r:.2f}x" if r is not None else "")


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r).rstrip() for r in body]
    return lines


def format_table(doc: dict[str, Any]) -> str:
    """The human-readable report: main table, resource usage, derived ratios, builds, compile."""
    s = doc["settings"]
    out = [
        f"Bulk output, {s['output_bytes'] or '?'} bytes to {s['stdout']}; {s['runs']} interleaved "
        f"runs per variant after {s['warmup']} warm-up round(s). Wall time: median (min-max).",
        "Ratio: cancho/C of medians (min-max of the paired per-round ratios). Reference: the seed's "
        "medians, cancho / C (runtime.md §10.1; cranelift, another machine).",
        "",
    ]
    body = []
    for row in doc["rows"]:
        if row.get("status") == "unavailable":
            body.append([row["title"], row["backend"], row.get("reason", "unavailable"),
                         f"{row['c']['label']}: {_side_cell(row['c'])}", "-", _ref_cell(row["reference"])])
            continue
        body.append([
            row["title"], row["backend"],
            f"{row['cancho']['label']}: {_side_cell(row['cancho'])}",
            f"{row['c']['label']}: {_side_cell(row['c'])}",
            _ratio_cell(row["ratio"]),
            _ref_cell(row["reference"]),
        ])
    out += _table(["row", "backend", "cancho", "C", "cancho/C", "reference"], body)

    usage = []
    for row in doc["rows"]:
        for side in ("cancho", "c"):
            t = row[side].get("timing")
            if t:
                usage.append([f"{row[side]['label']} ({row['backend']} row)",
                              f"{t['user_ms']['median']:.1f}", f"{t['sys_ms']['median']:.1f}",
                              f"{t['maxrss_kib']['median']:.0f}"])
    if usage:
        floor = doc.get("host", {}).get("maxrss_floor_kib")
        out += ["", "Resource usage (medians, from wait4; user/sys are tick-granular; max RSS "
                    f"includes the spawning harness's pre-exec image, /bin/true shows {floor} KiB):"]
        out += _table(["variant", "user ms", "sys ms", "max RSS KiB"], usage)

    derived = doc.get("derived") or []
    if derived:
        out += ["", "Between rows (exe backend):"]
        out += _table(["ratio", "measured", "reference"], [
            [d["title"], "-" if d["ratio"] is None else f"{d['ratio']:.2f}x",
             f"{d['reference']:.2f}x"] for d in derived])

    notes = sorted({row["note"] for row in doc["rows"] if row.get("note")})
    for note in notes:
        out += ["", f"Note: {note}."]

    problems = [(row, side) for row in doc["rows"] for side in ("cancho", "c")
                if row[side]["problems"]]
    if problems:
        out += ["", "Problems:"]
        for row, side in problems:
            for p in row[side]["problems"]:
                first = p.splitlines()[0] if p else p
                out.append(f"  {row['key']} [{row['backend']}] {row[side]['label']}: {first[:300]}")

    builds = doc.get("builds") or []
    if builds:
        out += ["", "Builds (one each, wall time incl. the builder's start-up):"]
        out += _table(["program", "builder", "time"], [
            [b["program"], b["builder"],
             f"{b['ms']:.0f} ms" if b["status"] == "ok" else "failed"] for b in builds])

    out += _costs_lines(doc.get("costs") or {})

    c = doc.get("compile") or {}
    out.append("")
    if c.get("status") == "ok":
        phases = ", ".join(f"{k} {v:.1f}" for k, v in c.get("phases_median_ms", {}).items())
        out.append(f"Compile {c['program']} to a runnable JIT function (warm process, "
                   f"{c['ms']['n']} runs): {_ms(c['ms'])}; phases ms: {phases}; via {c['method']}")
    else:
        out.append(f"Compile {c.get('program', '?')}: {c.get('status', 'unavailable')}"
                   f" ({c.get('reason', '')})")
    return "\n".join(out)


def _costs_lines(costs: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ex = costs.get("examples")
    if ex:
        out += ["", "Check and compile time of the example programs (warm process, median ms; "
                    "object = O2 + machine code, before linking):"]
        if ex.get("status") != "ok":
            out.append(f"  unavailable: {ex.get('reason')}")
        else:
            body = []
            for p in ex["programs"]:
                if p["status"] == "ok":
                    ms = p["ms"]
                    body.append([p["program"], f"{ms['check']['median']:.1f}", f"{ms['lower']['median']:.1f}",
                                 f"{ms['object']['median']:.1f}"])
                else:
                    body.append([p["program"], "failed", p.get("reason", "")[:80], ""])
            out += _table(["program", "check", "lower", "object"], body)
    kr = costs.get("kernel_roundtrip")
    if kr:
        out += ["", "Kernel: a hello cell's round trip (execute_request to idle, as a frontend sees it):"]
        if kr.get("status") != "ok":
            out.append(f"  {kr.get('status')}: {kr.get('reason')}")
        else:
            out.append(f"  kernel ready after {kr['ready_ms']:.0f} ms; first cell: " + ", ".join(
                f"{b} {v:.0f} ms" for b, v in kr["first_cell_ms"].items()))
            out += _table(["backend", "round trip ms: median (min-max)"],
                          [[b, _ms(s)] for b, s in kr["ms"].items()])
    return out


def write_json(doc: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")


_SUMMARY_KEYS = {"n", "median", "min", "max"}


def validate(doc: dict[str, Any]) -> list[str]:
    """Check a result document's shape; returns the problems found (empty when valid).

    Hand-written rather than a JSON Schema file because the harness is stdlib-only; the tests use
    it so that a change to the document's shape is a deliberate one.
    """
    errs: list[str] = []

    def need(obj: Any, key: str, types: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            errs.append(f"{where}: missing {key!r}")
            return None
        if not isinstance(obj[key], types):
            errs.append(f"{where}.{key}: expected {types}, got {type(obj[key]).__name__}")
            return None
        return obj[key]

    def summary(obj: Any, where: str) -> None:
        if not isinstance(obj, dict) or set(obj) != _SUMMARY_KEYS:
            errs.append(f"{where}: expected keys {sorted(_SUMMARY_KEYS)}")
        elif not obj["min"] <= obj["median"] <= obj["max"]:
            errs.append(f"{where}: median outside min-max")

    if doc.get("schema") != SCHEMA:
        errs.append(f"schema: expected {SCHEMA!r}")
    need(doc, "created", str, "doc")
    settings = need(doc, "settings", dict, "doc")
    if settings is not None:
        need(settings, "runs", int, "settings")
        need(settings, "warmup", int, "settings")
        need(settings, "backends", list, "settings")
    need(doc, "host", dict, "doc")
    rows = need(doc, "rows", list, "doc") or []
    for i, row in enumerate(rows):
        w = f"rows[{i}]"
        for key in ("key", "title", "backend", "status"):
            need(row, key, str, w)
        if row.get("status") not in ("ok", "failed", "unavailable"):
            errs.append(f"{w}.status: {row.get('status')!r}")
        need(row, "reference", dict, w)
        for side in ("cancho", "c"):
            s = need(row, side, dict, w)
            if s is None:
                continue
            need(s, "label", str, f"{w}.{side}")
            need(s, "problems", list, f"{w}.{side}")
            if s.get("status") == "ok":
                t = need(s, "timing", dict, f"{w}.{side}")
                if t is not None:
                    for k in ("wall_ms", "user_ms", "sys_ms", "maxrss_kib"):
                        summary(t.get(k), f"{w}.{side}.timing.{k}")
                    if not isinstance(t.get("samples_ms"), list) or \
                            len(t["samples_ms"]) != settings.get("runs", -1):
                        errs.append(f"{w}.{side}.timing.samples_ms: expected one per run")
        if row.get("status") == "ok":
            r = need(row, "ratio", dict, w)
            if r is not None and set(r) != {"of_medians", "paired_median", "paired_min",
                                            "paired_max"}:
                errs.append(f"{w}.ratio: wrong keys {sorted(r)}")
            if row.get("outputs_equal") is not True:
                errs.append(f"{w}: status ok but outputs_equal is not true")
    need(doc, "derived", list, "doc")
    need(doc, "builds", list, "doc")
    comp = need(doc, "compile", dict, "doc")
    if comp is not None:
        if comp.get("status") not in ("ok", "unavailable", "failed"):
            errs.append(f"compile.status: {comp.get('status')!r}")
        if comp.get("status") == "ok":
            summary(comp.get("ms"), "compile.ms")
    return errs
