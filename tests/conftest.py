"""Shared fixtures. Kept minimal: only what the kernel tests need to find the `cancho` kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def cancho_kernelspec() -> str:
    """Make sure Jupyter can find the `cancho` kernel, then return its name.

    `pip install .` registers it (wheel data); an editable install may not, so install the spec
    into this Python's prefix when `jupyter_client` does not see it.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if "cancho" not in KernelSpecManager().find_kernel_specs():
        subprocess.run([sys.executable, "-m", "cancho_kernel.install", "--sys-prefix"], check=True,
                       stdout=subprocess.DEVNULL)
    return "cancho"


@pytest.fixture(scope="module")
def kernel(cancho_kernelspec):
    """One running cancho kernel per test module (manager, client), driven by kernel_client."""
    from kernel_client import started_kernel

    yield from started_kernel()
