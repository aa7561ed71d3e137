"""Shared fixtures: the `cancho` kernel for the kernel tests, and a build cache of the run's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Builds the suite caches go to a directory of this run (inherited by the kernels and CLIs
    the tests start), not into the user's ~/.cache, and are removed at the end."""
    if "CANCHO_CACHE_DIR" not in os.environ:
        config._cancho_cache_dir = tempfile.mkdtemp(prefix="cancho-test-cache-")  # type: ignore[attr-defined]
        os.environ["CANCHO_CACHE_DIR"] = config._cancho_cache_dir  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    path = getattr(config, "_cancho_cache_dir", None)
    if path is not None:
        os.environ.pop("CANCHO_CACHE_DIR", None)
        shutil.rmtree(path, ignore_errors=True)


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


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build each LLVM IR program once with the exe backend; returns IR -> executable path."""
    from cancho_kernel.compiler.backends import exe

    root = tmp_path_factory.mktemp("exe")
    cache: dict[str, str] = {}

    def get(ir: str) -> str:
        if ir not in cache:
            path = root / f"p{len(cache)}"
            exe.build_executable(ir, path)
            cache[ir] = str(path)
        return cache[ir]

    return get
