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
import re
import statistics
import textwrap
from dataclasses import dataclass

C_COLOUR = "#8c8c8c"
CANCHO_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#17becf")


def plain(doc: dict) -> str:
    """The comparable line: what was timed and how often; never a time."""
    labels = " vs ".join(it["label"] for it in doc["items"])
    n = doc["runs"]
    extra = "".join(f", {k}={v}" for k, v in (doc.get("values") or {}).items())
    lines = [f"bench: {labels}, {n} run{'s' if n != 1 else ''} each{extra}"]
    lines += [f"claim {c['claim']}: {'holds' if c['holds'] else 'DOES NOT HOLD'}" for c in doc.get("claims", [])]
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
    for c in doc.get("claims", []):
        verdict = "holds" if c["holds"] else "<b>does not hold</b>"
        notes.insert(0, f"claim <code>{html.escape(c['claim'])}</code> {verdict}: paired median of CPU "
                        f"time (user + sys) {c['ratio']:.2f}")
    values = doc.get("values")
    if values:
        notes.insert(0, "values: " + ", ".join(f"{html.escape(k)}={v}" for k, v in values.items()))
    return (f"<table class=\"cancho-bench\"><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            + "".join(f"<p style=\"font-size:smaller\">{n}</p>" for n in notes))


@dataclass(frozen=True)
class Measure:
    """One measure a chart shows, per program: the median, its whisker (min–max) and the
    ratio to the first program, paired per round (as a claim computes it for CPU time)."""

    title: str
    median: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    ratio: tuple[float | None, ...]


def _paired(samples: list[list[float]]) -> tuple[float | None, ...]:
    first = samples[0]
    out: list[float | None] = []
    for s in samples:
        pairs = [x / y for x, y in zip(s, first) if y > 0]
        out.append(statistics.median(pairs) if pairs else None)
    return tuple(out)


def _measure(title: str, samples: list[list[float]]) -> Measure:
    med = tuple(statistics.median(s) if s else 0.0 for s in samples)
    return Measure(title, med, tuple(min(s) if s else 0.0 for s in samples),
                   tuple(max(s) if s else 0.0 for s in samples), _paired(samples))


def wall(doc: dict) -> Measure:
    """Wall time: the item summaries' median and min–max, the bench's paired ratio."""
    items = doc["items"]
    ratios = tuple(1.0 if i == 0 else (it["ratio"]["median"] if it.get("ratio") else None)
                   for i, it in enumerate(items))
    return Measure("wall time, ms", tuple(it["wall_ms"]["median"] for it in items),
                   tuple(it["wall_ms"]["min"] for it in items), tuple(it["wall_ms"]["max"] for it in items), ratios)


def cpu(doc: dict) -> Measure:
    """CPU time (user + sys) per run: what ``--claim`` judges."""
    samples = []
    for it in doc["items"]:
        raw = it.get("samples") or {}
        if raw.get("user_ms"):
            samples.append([u + s for u, s in zip(raw["user_ms"], raw["sys_ms"])])
        else:                               # a document without its samples: the medians alone
            samples.append([it["user_ms"]["median"] + it["sys_ms"]["median"]])
    return _measure("CPU time (user + sys), ms", samples)


def tick_label(label: str, width: int) -> str:
    """A program's name broken into lines of about ``width`` characters, at spaces and
    underscores first (``base64_before`` → ``base64_\nbefore``)."""
    if len(label) <= width:
        return label
    parts = re.findall(r"[^ _]+[ _]?|[ _]", label)
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        while len(part) > width:            # one word longer than the line: cut it
            lines.append(part[:width])
            part = part[width:]
        line += part
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines)


def alt_text(doc: dict) -> str:
    """What the plot shows, for a reader who cannot see it: the programs, their medians and
    their ratios to the first, in both measures, and each claim's verdict."""
    w, c = wall(doc), cpu(doc)
    n = doc["runs"]

    def row(m: Measure) -> str:
        return "; ".join(f"{it['label']} {med:.2f} ms" + (f" ({r:.2f}× first)" if r is not None else "")
                         for it, med, r in zip(doc["items"], m.median, m.ratio))

    text = (f"Bar chart of a bench of {len(doc['items'])} program{'s' if len(doc['items']) != 1 else ''}, "
            f"{n} run{'s' if n != 1 else ''} each. Wall time, median: {row(w)}. "
            f"CPU time (user + sys), median: {row(c)}.")
    for cl in doc.get("claims", []):
        text += f" Claim {cl['claim']} (CPU time): {cl['ratio']:.2f}, {'holds' if cl['holds'] else 'does not hold'}."
    return text


def _bars(ax, m: Measure, colours: list[str], labels: list[str], fig_width: float, n: int) -> None:
    """One measure's bars, whiskers and ratios, with headroom above the tallest whisker."""
    x = list(range(n))
    ax.bar(x, m.median, color=colours, yerr=[[md - lo for md, lo in zip(m.median, m.low)],
                                             [hi - md for md, hi in zip(m.median, m.high)]],
           capsize=5, ecolor="#333333")
    top = max(m.high) or 1.0
    for i, r in enumerate(m.ratio):
        if r is not None:
            ax.text(i, m.high[i] + top * 0.03, f"{r:.2f}×", ha="center", va="bottom", fontsize=9,
                    fontweight="bold")
    ax.set_ylim(0, top * 1.25)
    width = max(8, int(fig_width * 0.5 * 72 / n / 7.5))    # characters a tick's slot holds at 9 pt
    ax.set_xticks(x, [tick_label(lb, width) for lb in labels], fontsize=9)
    ax.set_ylabel(m.title)
    ax.spines[["top", "right"]].set_visible(False)


def png(doc: dict) -> bytes | None:
    """The chart as PNG, or None when matplotlib is not installed."""
    fig = figure(doc)
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def figure(doc: dict):
    """The chart (a matplotlib Figure, no pyplot state), or None without matplotlib: wall time
    and CPU time side by side, each with its whiskers and its ratio to the first program (the
    CPU panel's is the one a claim judges), the claims and their verdicts in the CPU panel's
    title; names wrapped to their slot, headroom above the tallest whisker and its ratio."""
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
    width = min(12.0, max(7.5, 2.2 * n + 3.0))
    fig = Figure(figsize=(width, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    wall_ax, cpu_ax = fig.subplots(1, 2)
    _bars(wall_ax, wall(doc), colours, labels, width, n)
    _bars(cpu_ax, cpu(doc), colours, labels, width, n)
    chars = int(width * 0.5 * 72 / 6.5)                     # a panel title's line at 9 pt
    wall_ax.set_title(textwrap.fill("wall time: median, min–max; × first, paired per round", chars), fontsize=9)
    claims = "; ".join(f"{c['claim']}: {c['ratio']:.2f} {'holds' if c['holds'] else 'DOES NOT HOLD'}"
                       for c in doc.get("claims", []))
    cpu_ax.set_title(textwrap.fill("CPU time, user + sys: median, min–max; × first, paired per round"
                                   + (" — what --claim judges: " + claims if claims else ""), chars), fontsize=9)
    heading = f"{n} program{'s' if n != 1 else ''}, {doc['runs']} interleaved run{'s' if doc['runs'] != 1 else ''} each"
    if doc.get("values"):
        heading += "  [" + ", ".join(f"{k}={v}" for k, v in doc["values"].items()) + "]"
    fig.suptitle(heading, fontsize=10)
    return fig


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
                       {"image/png": {"alt": alt_text(doc)}})
    else:
        table_meta["cancho"]["plot"] = "unavailable: matplotlib is not installed"
    return BenchDisplays(plot, Display({"text/plain": plain(doc), "text/html": table(doc)}, table_meta))
