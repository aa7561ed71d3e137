"""A library notebook as an HTML page (nbconvert's ``lab`` template, extended) and the small pieces
of text the library's index shares with it (issue 23, items 3, 5 and 6):

* every image carries its output's ``alt`` metadata (a bench plot says what it shows; nbconvert's
  ``lab`` template drops it and then warns "Alternative text is missing");
* a banner at the top: a Binder launch link for the notebook and, when the run failed, the
  failing cell's first line in red, linked to the cell (``#cell-id=ID``, the lab template's anchor);
* titles written in Markdown rendered to inline HTML or to text (only code, emphasis and strong
  survive; links become their text, since a title sits inside the link to its page).
"""

from __future__ import annotations

import html
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .library_run import Failure

BINDER = "https://mybinder.org/v2/gh"
_INLINE_TAGS = ("code", "em", "strong")

TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block body_header -%}
{{ super() }}
{%- set lib = resources.get('cancho_library', {}) -%}
{%- if lib.binder or lib.failure -%}
<div class="cancho-library-banner" style="font-family:sans-serif;padding:.6em 1em;border-bottom:1px solid #ddd">
{%- if lib.binder %}<a class="cancho-binder" href="{{ lib.binder | escape_html }}">Run this notebook on Binder</a>
(no installation: a JupyterLab in your browser, with the cancho kernel){% endif -%}
{%- if lib.failure %}<p class="cancho-failed" style="color:#b00020;margin:.4em 0 0">FAILED in this run at
<a style="color:#b00020" href="#{{ ('cell-id=' ~ lib.failure.cell_id) | escape_html }}"><code>{{ lib.failure.first_line
| escape_html }}</code></a>: {{ lib.failure.message | escape_html }}</p>{% endif -%}
</div>
{%- endif -%}
{%- endblock body_header -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
{%- set width=output | get_metadata('width', 'image/png') -%}
{%- if width is not none %} width={{ width | escape_html }}{% endif -%}
{%- set height=output | get_metadata('height', 'image/png') -%}
{%- if height is not none %} height={{ height | escape_html }}{% endif -%}
{%- set alttext=(output | get_metadata('alt', 'image/png')) or (cell | get_metadata('alt')) -%}
{%- if alttext %} alt="{{ alttext | escape_html }}"{% endif %}>
</div>
{%- endblock data_png %}
"""


@dataclass(frozen=True)
class Repository:
    """The GitHub repository the library is launched from (``[project.urls] Repository``)."""

    owner: str
    name: str

    def binder(self, notebook: str, ref: str = "HEAD") -> str:
        """The Binder launch link that opens ``notebooks/NOTEBOOK`` in JupyterLab."""
        return f"{BINDER}/{self.owner}/{self.name}/{ref}?labpath={quote('notebooks/' + notebook, safe='')}"


def repository(pyproject: Path) -> Repository | None:
    """The repository declared once in ``pyproject.toml``; None when it is not on GitHub."""
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("urls", {})
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", urls.get("Repository", ""))
    return Repository(m.group(1), m.group(2)) if m else None


def inline_html(markdown: str) -> str:
    """A one-line Markdown title as safe inline HTML: code spans, emphasis and strong kept,
    links reduced to their text, anything else (raw HTML included) escaped."""
    import mistune
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(mistune.html(markdown), "html.parser")
    for tag in soup.find_all(True):
        if tag.name not in _INLINE_TAGS:
            tag.unwrap()
    parts = []
    for node in soup.contents:
        if getattr(node, "name", None) in _INLINE_TAGS:
            parts.append(f"<{node.name}>{html.escape(node.get_text())}</{node.name}>")
        else:
            parts.append(html.escape(str(node)))
    return "".join(parts).strip()


def inline_text(markdown: str) -> str:
    """A one-line Markdown title as plain text (for alt text and progress lines)."""
    import mistune
    from bs4 import BeautifulSoup

    return BeautifulSoup(mistune.html(markdown), "html.parser").get_text().strip()


def exporter():
    """nbconvert's HTML exporter with the library's template (alt text, banner)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(extra_loaders=[DictLoader({"cancho_library.html.j2": TEMPLATE})],
                        template_file="cancho_library.html.j2")


def export(nb, binder: str | None, failure: Failure | None) -> str:
    """The notebook's page."""
    lib: dict = {"binder": binder}
    if failure is not None:
        lib["failure"] = {"cell_id": failure.cell_id or "", "first_line": failure.first_line,
                          "message": failure.message}
    body, _ = exporter().from_notebook_node(nb, resources={"cancho_library": lib})
    return body
