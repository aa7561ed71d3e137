"""`%%run --display KIND`: what a program writes to stdout shown as that kind of output, so a
cancho program can draw a picture or a table in the notebook.

* ``image/png``, ``image/svg+xml``, ``text/html``: the bytes as they are (PNG checked by its
  signature, SVG and HTML as UTF-8);
* ``text/csv``: parsed by Python's ``csv`` and shown as an HTML table (the text kept as plain);
* ``ppm``: a Netpbm P6 (binary) or P3 (text) image converted to PNG by Pillow.

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
MAX_PIXELS = 64 << 20  # a PPM header cannot make the kernel allocate more than this


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
    """CSV as an HTML table, the first row as its head."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return "<p>(no rows)</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<table class=\"cancho-csv\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


def ppm_to_png(data: bytes) -> tuple[bytes, int, int]:
    """A P6/P3 image as PNG bytes, with its size."""
    from PIL import Image

    magic, width, height, maxval, at = _ppm_header(data)
    if magic == b"P3":
        try:
            values = [int(v) for v in data[at - 1:].split()]
        except ValueError:
            raise DirectiveError("--display ppm: a P3 sample is not a number") from None
        if len(values) < width * height * 3:
            raise DirectiveError(f"--display ppm: {len(values)} samples for {width * height * 3}")
        raw = bytes(min(255, v * 255 // maxval) for v in values[:width * height * 3])
    else:
        size = width * height * 3 * (1 if maxval < 256 else 2)
        raw = data[at:at + size]
        if len(raw) < size:
            raise DirectiveError(f"--display ppm: {len(raw)} bytes of pixels for a {width}×{height} image "
                                 f"({size} expected)")
        if maxval >= 256:
            raw = bytes(((raw[k] << 8 | raw[k + 1]) * 255 // maxval) for k in range(0, size, 2))
        elif maxval != 255:
            raw = bytes(v * 255 // maxval for v in raw)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), raw).save(out, format="PNG")
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
