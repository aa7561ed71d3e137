"""The CPU native code is generated for: ``CANCHO_CPU=host`` (the default) or ``CANCHO_CPU=baseline``.

``host`` compiles for the machine at hand: LLVM gets the host's CPU name and features (AVX2,
AVX-512, … where present) and ``%%c`` baselines get ``cc -march=native`` (``-ffp-contract=off``
both ways). ``baseline`` compiles for the architecture's baseline, the code any machine of that architecture runs: LLVM's
default CPU for the triple without a single extra feature (the ``x86-64`` instruction set, SSE2, on
x86-64; ARMv8-A on AArch64: what this compiler generated before ``CANCHO_CPU`` existed, so the
notebooks' stored listings are the baseline's), and ``cc -march=x86-64 -mtune=generic`` /
``-march=armv8-a``. A timing that holds under both is not an artefact
of one machine's vector units (docs/claims.md); docs/cli.md documents the variable.

The choice is part of every cache key for machine code (:func:`description`, :func:`identity`): the build cache's
objects and executables, and the JIT worker's programs and pieces.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from dataclasses import dataclass
from enum import Enum

ENV = "CANCHO_CPU"


class CpuChoice(str, Enum):
    HOST = "host"
    BASELINE = "baseline"


class CpuError(ValueError):
    """``CANCHO_CPU`` holds something other than ``host`` or ``baseline``."""


@dataclass(frozen=True)
class LlvmCpu:
    """What :func:`native.target_machine` passes to LLVM."""

    name: str
    features: str


def choice() -> CpuChoice:
    """The CPU chosen by ``CANCHO_CPU`` (read at each call: a test or a CLI run may set it)."""
    text = os.environ.get(ENV, "").strip().lower() or CpuChoice.HOST.value
    try:
        return CpuChoice(text)
    except ValueError:
        raise CpuError(f"{ENV}={text!r}: use `host` (the default) or `baseline`") from None


def _is_aarch64() -> bool:
    return platform.machine().lower() in ("aarch64", "arm64")


@functools.cache
def _host_cpu() -> LlvmCpu:
    import llvmlite.binding as llvm

    return LlvmCpu(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


def llvm_cpu(which: CpuChoice | None = None) -> LlvmCpu:
    """LLVM's CPU name and feature string for the chosen CPU (native targets only)."""
    which = which or choice()
    if which is CpuChoice.HOST:
        return _host_cpu()
    return LlvmCpu("", "")  # LLVM's default for the triple: the base instruction set, default tuning


def cc_flags(which: CpuChoice | None = None) -> list[str]:
    """The ``-march`` flag for C baselines under the chosen CPU, and ``-ffp-contract=off``: GCC
    fuses a multiply and an add into one FMA wherever the CPU has one (the host's, AArch64's
    baseline), which rounds once instead of twice, so a C baseline's float answers would then
    depend on the CPU and differ from cancho's (LLVM never fuses unasked)."""
    which = which or choice()
    if which is CpuChoice.HOST:
        return ["-march=native", "-ffp-contract=off"]
    if _is_aarch64():
        return ["-march=armv8-a", "-ffp-contract=off"]
    return ["-march=x86-64", "-mtune=generic", "-ffp-contract=off"]


def description(which: CpuChoice | None = None) -> str:
    """The chosen CPU as a key part of the JIT's caches: its choice, LLVM's name and features."""
    which = which or choice()
    cpu = llvm_cpu(which)
    return f"cpu={which.value}:{cpu.name}:{cpu.features}"


def identity(which: CpuChoice | None = None) -> str:
    """The chosen CPU as a build-cache key part, without loading LLVM (a warm build never
    needs it): for the host, the architecture, CPU model and feature flags the kernel reports."""
    which = which or choice()
    if which is CpuChoice.BASELINE:
        return f"cpu=baseline:{platform.machine()}"
    return f"cpu=host:{platform.machine()}:{_proc_cpu()}"


@functools.cache
def _proc_cpu() -> str:
    """The first processor's model and flags from ``/proc/cpuinfo`` (hashed: the flags are long)."""
    wanted = ("model name", "flags", "features", "cpu implementer", "cpu part", "cpu variant")
    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block ends here
                key = line.split(":", 1)[0].strip().lower()
                if key in wanted:
                    lines.append(line.strip())
    except OSError:
        return "unknown"
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]
