"""Fixtures of the browser suite: one JupyterLab server and one headless Chromium per run.

The server's root is a scratch copy of the repository's reading layout (``notebooks/`` copied,
``examples/`` linked), so notebooks find what they ``%load`` and nothing a test runs or saves
touches the repository. Screenshots go to ``out/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from driver import Lab  # noqa: E402
from lab import CHROMIUM_ARGS, LabServer, chromium_path  # noqa: E402

ROOT = HERE.parent.parent
SCREENSHOTS = ROOT / "out" / "screenshots"


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lab-root")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    (root / "examples").symlink_to(ROOT / "examples")
    return root


@pytest.fixture(scope="session")
def lab_server(cancho_kernelspec, lab_root, tmp_path_factory):
    server = LabServer(lab_root, tmp_path_factory.mktemp("lab-state")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        pytest.fail("the browser suite needs Chromium: `apt-get install chromium` (Debian's package; "
                    ".ci/run installs it), or name one with CANCHO_CHROMIUM")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so a fixture can tell that its test failed."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


@pytest.fixture
def lab(request, browser, lab_server):
    """A fresh browser context on the Lab server; its page is closed after the test, and
    photographed first when the test failed (``out/screenshots/FAILED-<test>.png``)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield Lab(page, lab_server.url)
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in request.node.name)
        try:
            page.screenshot(path=str(SCREENSHOTS / f"FAILED-{name}.png"))
        except Exception:  # a dead page: the failure itself says enough
            pass
    context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
