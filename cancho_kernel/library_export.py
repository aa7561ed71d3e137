"""A library notebook as an HTML page (nbconvert's ``lab`` template, extended by the package's
``cancho`` template in ``nbconvert_templates/``) and the small pieces
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

TEMPLATES = Path(__file__).resolve().parent / "nbconvert_templates"   # cancho/: conf.json, index.html.j2


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
    """nbconvert's HTML exporter with the package's ``cancho`` template (alt text, banner),
    the one a wheel also installs for ``jupyter nbconvert --template cancho``."""
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="cancho", extra_template_basedirs=[str(TEMPLATES)])


def export(nb, binder: str | None, failure: Failure | None) -> str:
    """The notebook's page."""
    lib: dict = {"binder": binder}
    if failure is not None:
        lib["failure"] = {"cell_id": failure.cell_id or "", "first_line": failure.first_line,
                          "message": failure.message}
    body, _ = exporter().from_notebook_node(nb, resources={"cancho_library": lib})
    return body
