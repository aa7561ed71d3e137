"""`%%run --display KIND`: what a program writes to stdout shown as that kind of output, so a
cancho program can draw a picture or a table in the notebook.

* ``image/png``, ``image/svg+xml``, ``text/html``: the bytes as they are (PNG checked by its
  signature, SVG and HTML as UTF-8);
* ``text/csv``: parsed by Python's ``csv`` and shown as an HTML table (the text kept as plain);
* ``ppm``: a Netpbm P6 (binary, 8 or 16 bits) or P3 (text) image converted to PNG by Pillow
  (at most 16 Mi pixels; a header cannot make the kernel allocate more).

Each output also carries a ``text/plain`` description, since a frontend that shows no images
(a terminal, nbval) shows that. Bytes that are not what the kind promises are refused with the
reason; so is an output cut at the ``--max-output`` cap (half an image is not an image).
"""

from __future__ import annotations

import base64
import csv
import enum
import html
import io

from .options import DirectiveError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PIXELS = 16 << 20  # a PPM header cannot make the kernel allocate more than this
MAX_P3_TEXT = 16 << 20  # P3 is parsed into numbers: text beyond this is refused (write P6)
MAX_CSV_ROWS = 1000  # rows a CSV table shows (the text keeps them all)


class DisplayKind(enum.StrEnum):
    PNG = "image/png"
    SVG = "image/svg+xml"
    HTML = "text/html"
    CSV = "text/csv"
    PPM = "ppm"


KINDS = tuple(k.value for k in DisplayKind)


def _text(data: bytes, kind: DisplayKind) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DirectiveError(f"--display {kind}: the program's output is not UTF-8 (byte {e.start})") from None


def csv_table(text: str) -> str:
    """CSV as an HTML table, the first row as its head, at most MAX_CSV_ROWS rows below it."""
    rows = []
    for k, row in enumerate(csv.reader(io.StringIO(text))):
        if k > MAX_CSV_ROWS:
            break
        rows.append(row)
    if not rows:
        return "<p>(no rows)</p>"
    more = text.count("\n") - MAX_CSV_ROWS if len(rows) > MAX_CSV_ROWS else 0
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows[1:MAX_CSV_ROWS + 1])
    note = f"<p>the first {MAX_CSV_ROWS} rows of about {MAX_CSV_ROWS + more}</p>" if more > 0 else ""
    return f"<table class=\"cancho-csv\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def _ppm_header(data: bytes) -> tuple[bytes, int, int, int, int]:
    """(magic, width, height, maxval, offset of the pixels) of a Netpbm header, comments skipped."""
    fields: list[bytes] = []
    i = 0
    while len(fields) < 4:
        while i < len(data) and data[i:i + 1].isspace():
            i += 1
        if data[i:i + 1] == b"#":
            while i < len(data) and data[i:i + 1] not in (b"\n", b"\r"):
                i += 1
            continue
        start = i
        while i < len(data) and not data[i:i + 1].isspace() and data[i:i + 1] != b"#":
            i += 1
        if start == i:
            raise DirectiveError("--display ppm: the output ends inside the PPM header")
        fields.append(data[start:i])
    magic = fields[0]
    if magic not in (b"P6", b"P3"):
        raise DirectiveError(f"--display ppm: the output does not start with P6 or P3 (it starts with {data[:8]!r})")
    try:
        width, height, maxval = (int(f) for f in fields[1:])
    except ValueError:
        raise DirectiveError("--display ppm: the header's width, height and maximum are not numbers") from None
    if not (0 < width and 0 < height and width * height <= MAX_PIXELS and 0 < maxval < 65536):
        raise DirectiveError(f"--display ppm: a {width}×{height} image with maximum {maxval} is not shown "
                             f"(at most {MAX_PIXELS} pixels, maximum 1 to 65535)")
    return magic, width, height, maxval, i + 1


def _samples(data: bytes, magic: bytes, width: int, height: int, maxval: int, at: int):
    """The image's samples scaled to 0..255, as a uint8 array of width × height × 3."""
    import numpy as np

    count = width * height * 3
    if magic == b"P3":
        text = data[at - 1:]
        if len(text) > MAX_P3_TEXT:
            raise DirectiveError(f"--display ppm: a P3 image of more than {MAX_P3_TEXT >> 20} MiB of text is "
                                 "not read; write P6 (binary)")
        try:
            values = np.array(text.split()[:count], dtype=np.int64)
        except ValueError:
            raise DirectiveError("--display ppm: a P3 sample is not a number") from None
    else:
        wide = maxval >= 256
        raw = data[at:at + count * (2 if wide else 1)]
        if len(raw) < count * (2 if wide else 1):
            raise DirectiveError(f"--display ppm: {len(raw)} bytes of pixels for a {width}×{height} image "
                                 f"({count * (2 if wide else 1)} expected)")
        values = np.frombuffer(raw, dtype=">u2" if wide else np.uint8).astype(np.int64)
    if len(values) < count:
        raise DirectiveError(f"--display ppm: {len(values)} samples for {count}")
    if maxval != 255:
        values = np.minimum(values, maxval) * 255 // maxval
    return values.astype(np.uint8).reshape(height, width, 3)


def ppm_to_png(data: bytes) -> tuple[bytes, int, int]:
    """A P6/P3 image as PNG bytes, with its size."""
    from PIL import Image

    magic, width, height, maxval, at = _ppm_header(data)
    pixels = _samples(data, magic, width, height, maxval, at)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG")
    return out.getvalue(), width, height


def bundle(kind: str, data: bytes) -> dict:
    """The display_data bundle for ``data`` shown as ``kind``."""
    k = DisplayKind(kind)
    if k is DisplayKind.PNG:
        if not data.startswith(PNG_SIGNATURE):
            raise DirectiveError("--display image/png: the program's output is not a PNG (no PNG signature)")
        return {"image/png": base64.b64encode(data).decode("ascii"),
                "text/plain": f"<PNG image, {len(data)} bytes>"}
    if k is DisplayKind.PPM:
        png, w, h = ppm_to_png(data)
        return {"image/png": base64.b64encode(png).decode("ascii"),
                "text/plain": f"<{w}×{h} image (PPM, shown as PNG)>"}
    text = _text(data, k)
    if k is DisplayKind.SVG:
        if "<svg" not in text:
            raise DirectiveError("--display image/svg+xml: the program's output has no <svg> element")
        return {"image/svg+xml": text, "text/plain": f"<SVG image, {len(data)} bytes>"}
    if k is DisplayKind.HTML:
        return {"text/html": text, "text/plain": text}
    return {"text/html": csv_table(text), "text/plain": text}
