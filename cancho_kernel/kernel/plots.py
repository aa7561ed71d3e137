"""How a bench result looks: a PNG plot (matplotlib, Agg, no pyplot global state) and an HTML table,
published as two outputs, each with a ``text/plain`` line without a single timing figure (nbval
compares ``text/plain`` and ``text/html`` but never ``image/png``).

The HTML table does carry the numbers: a notebook that keeps a bench cell under strict nbval tags
it ``nbval-ignore-output`` (or masks the table with a sanitize file), while its ``text/plain``
stays comparable.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass

from . import claims

C_COLOUR = "#8c8c8c"
CANCHO_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#17becf")


def plain(doc: dict) -> str:
    """The comparable line: what was timed and how often; never a time."""
    labels = " vs ".join(it["label"] for it in doc["items"])
    n = doc["runs"]
    extra = "".join(f", {k}={v}" for k, v in (doc.get("values") or {}).items())
    lines = [f"bench: {labels}, {n} run{'s' if n != 1 else ''} each{extra}"]
    lines += [claims.plain_line(s) for s in doc.get("statements", [])]
    return "\n".join(lines)


def _ms(s: dict | None, digits: int = 2) -> str:
    if not s:
        return "–"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def _one(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def table(doc: dict) -> str:
    rows = []
    for it in doc["items"]:
        r = it["ratio"]
        ratio = "1.00× (first)" if it is doc["items"][0] else (
            f"{r['median']:.2f}× ({r['min']:.2f}–{r['max']:.2f})" if r else "–")
        rss = it["peak_rss_kib"]
        b = it["build"]
        build = ", ".join(f"{k} {v:.1f}" for k, v in (("compile", b.get("compile_ms")), ("link", b.get("link_ms")),
                                                       ("MCJIT", b.get("mcjit_ms"))) if v is not None) or "–"
        rows.append(
            "<tr>" + "".join(f"<td>{c}</td>" for c in (
                f"<b>{html.escape(it['label'])}</b>", html.escape(it["backend"]),
                _ms(it["wall_ms"]), ratio, _ms(it["user_ms"]), _ms(it["sys_ms"]),
                _one(rss["median"] / 1024 if rss else None), build)) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in (
        "program", "backend", "wall ms: median (min–max)", "÷ first, paired per round", "user ms", "sys ms",
        "peak RSS MiB", "build ms"))
    notes = [f"{doc['runs']} interleaved runs each after {doc['warmup']} warm-up round(s); stdout to "
             f"{html.escape(doc['stdout'])}" + (f" ({html.escape(doc['stdout_how'])})" if doc.get("stdout_how") else "")
             + ". Ratios divide each program's run by the first program's run of the same round."]
    if any(it["backend"] == "jit" for it in doc["items"]):
        notes.append("jit runs are forks of the warm JIT worker: their peak RSS includes the worker's image, "
                     "and the MCJIT time (per run, median) is not part of the wall time.")
    if any(it["backend"] in ("exe", "cc") for it in doc["items"]):
        notes.append("exe and C runs are spawned by the kernel: Linux counts the kernel's own image before exec in "
                     "their peak RSS, so only differences above it mean anything.")
    notes[:0] = [claims.html_note(s) for s in doc.get("statements", [])]
    values = doc.get("values")
    if values:
        notes.insert(0, "values: " + ", ".join(f"{html.escape(k)}={v}" for k, v in values.items()))
    return (f"<table class=\"cancho-bench\"><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            + "".join(f"<p style=\"font-size:smaller\">{n}</p>" for n in notes))


def png(doc: dict) -> bytes | None:
    """The bar chart, or None when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    items = doc["items"]
    labels = [it["label"] for it in items]
    colours, k = [], 0
    for it in items:
        if it["kind"] == "c":
            colours.append(C_COLOUR)
        else:
            colours.append(CANCHO_COLOURS[k % len(CANCHO_COLOURS)])
            k += 1
    n = len(items)
    fig = Figure(figsize=(max(6.0, 1.3 * n + 4.5), 3.6), dpi=100)
    FigureCanvasAgg(fig)
    wall_ax, cpu_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    x = list(range(n))
    med = [it["wall_ms"]["median"] for it in items]
    lo = [it["wall_ms"]["median"] - it["wall_ms"]["min"] for it in items]
    hi = [it["wall_ms"]["max"] - it["wall_ms"]["median"] for it in items]
    bars = wall_ax.bar(x, med, color=colours, yerr=[lo, hi], capsize=5, ecolor="#333333")
    top = max(m + h for m, h in zip(med, hi)) or 1.0
    for i, (bar, it) in enumerate(zip(bars, items)):
        r = it["ratio"]
        text = "1.00×" if i == 0 else (f"{r['median']:.2f}×" if r else "")
        wall_ax.text(bar.get_x() + bar.get_width() / 2, med[i] + hi[i] + top * 0.02, text,
                     ha="center", va="bottom", fontsize=9, fontweight="bold")
    wall_ax.set_ylim(0, top * 1.18)
    wall_ax.set_xticks(x, labels, rotation=15 if n > 3 else 0, ha="right" if n > 3 else "center")
    wall_ax.set_ylabel("wall time, ms")
    title = f"wall time: median, min–max ({doc['runs']} runs); × first, paired per round"
    if doc.get("values"):
        title += "  [" + ", ".join(f"{k}={v}" for k, v in doc["values"].items()) + "]"
    wall_ax.set_title(title, fontsize=9)
    user = [it["user_ms"]["median"] for it in items]
    system = [it["sys_ms"]["median"] for it in items]
    cpu_ax.bar(x, user, color=colours, label="user")
    cpu_ax.bar(x, system, bottom=user, color=colours, alpha=0.45, hatch="//", label="sys")
    cpu_ax.set_xticks(x, labels, rotation=15 if n > 3 else 0, ha="right" if n > 3 else "center")
    cpu_ax.set_ylabel("CPU time, ms (median)")
    cpu_ax.set_title("user (solid) + sys (hatched)", fontsize=9)
    for ax in (wall_ax, cpu_ax):
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


@dataclass(frozen=True)
class Display:
    """One output's mime bundle and metadata. A frontend shows one format per output (JupyterLab
    and nbconvert both prefer HTML to PNG), so a plot and a table are two displays, never one."""

    data: dict
    metadata: dict


@dataclass(frozen=True)
class BenchDisplays:
    """What a bench publishes: its plot (``image/png``, or ``None`` without matplotlib) and its
    table (``text/html``) as separate outputs; the raw numbers ride in the table's metadata."""

    plot: Display | None
    table: Display


def plot_plain(doc: dict) -> str:
    """The plot's comparable ``text/plain`` (what a text frontend shows instead of the image)."""
    return "<bench plot: " + " vs ".join(it["label"] for it in doc["items"]) + ">"


def displays(doc: dict) -> BenchDisplays:
    """The plot and the table of a bench document."""
    image = png(doc)
    table_meta: dict = {"cancho": {"bench": doc}}
    plot = None
    if image is not None:
        plot = Display({"image/png": base64.b64encode(image).decode("ascii"), "text/plain": plot_plain(doc)},
                       {"image/png": {"alt": plain(doc)}})
    else:
        table_meta["cancho"]["plot"] = "unavailable: matplotlib is not installed"
    return BenchDisplays(plot, Display({"text/plain": plain(doc), "text/html": table(doc)}, table_meta))
