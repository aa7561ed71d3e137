"""The example programs (``examples/`` in the repository) as the installed package carries them,
so a notebook names one with ``%load --example base64/base64.cho`` and runs wherever its folder
was copied (a hub's per-student copy, one downloaded notebook), never through a path relative to
the repository.

A wheel carries them as package data, ``cancho_kernel/examples`` (``pyproject.toml``'s
``force-include``); an editable install or a checkout imports the package from the source tree,
whose ``examples/`` is beside it. Names are relative ``.cho`` paths under that root: anything
that leaves it (``..``, an absolute path, a link pointing out) is refused, in safe mode or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath


class ExampleError(ValueError):
    """A name that is not one of the packaged examples; the message lists those that are."""


@dataclass(frozen=True)
class Example:
    """One packaged example: its name (``base64/base64.cho``) and its file on disk."""

    name: str
    path: Path


def examples_root() -> Path | None:
    """Where the examples are: the package data of a wheel, else the source tree's
    ``examples/`` (editable install, checkout); None when neither exists."""
    packaged = Path(str(resources.files("cancho_kernel") / "examples"))
    if packaged.is_dir():
        return packaged
    source = Path(str(resources.files("cancho_kernel"))).parent / "examples"
    return source if source.is_dir() else None


def available(root: Path | None = None) -> tuple[str, ...]:
    """Every example program's name, sorted."""
    root = root if root is not None else examples_root()
    if root is None:
        return ()
    return tuple(sorted(p.relative_to(root).as_posix() for p in root.rglob("*.cho") if p.is_file()))


def find(name: str, root: Path | None = None) -> Example:
    """The example called ``name``; an unknown or escaping name raises ExampleError listing
    the available ones."""
    root = root if root is not None else examples_root()
    names = available(root)
    listing = ", ".join(names) if names else "none (the package was installed without examples/)"
    pure = PurePosixPath(name)
    if root is None or pure.is_absolute() or ".." in pure.parts or "\0" in name or name not in names:
        raise ExampleError(f"no example `{name}`; the available examples are: {listing}")
    path = (root / pure).resolve()
    if root.resolve() not in path.parents:
        raise ExampleError(f"no example `{name}` inside the packaged examples; the available examples are: "
                           f"{listing}")
    return Example(name, path)
