"""``CANCHO_CPU``: the host CPU by default, the architecture's baseline on request, for LLVM (both
backends, `cancho asm`) and for ``%%c`` baselines' ``-march``; the choice is part of every cache
key for machine code, so a baseline build never reuses a host object."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from cancho_kernel.compiler import cache, cpu

ROOT = Path(__file__).resolve().parent.parent

VECTOR_LOOP = """fn sum_wrapping[&r](xs: &r [int]) -> [] int {
    var s = 0;
    var k = 0;
    while k < len(xs) {
        s = wrapping_add(s, xs[k]);
        k = wrapping_add(k, 1);
    }
    return s;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args);
    var total = 0;
    region a {
        let xs = alloc_slice[a](4096, 7);
        total = sum_wrapping(xs);
    }
    return total % 256;
}
"""


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _cancho(args: list[str], cpu_name: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CANCHO_CPU": cpu_name, "PYTHONPATH": str(ROOT), "CANCHO_CACHE_DIR": str(tmp / "cache")}
    return subprocess.run([sys.executable, "-m", "cancho_kernel.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the register names are x86-64's")
def test_asm_differs_between_host_and_baseline_and_baseline_has_no_wide_registers(tmp_path):
    src = tmp_path / "vec.cho"
    src.write_text(VECTOR_LOOP)
    host = _cancho(["asm", str(src)], "host", tmp_path)
    base = _cancho(["asm", str(src)], "baseline", tmp_path)
    assert host.returncode == 0 and base.returncode == 0, host.stderr + base.stderr
    assert "paddq" in base.stdout  # the loop is vectorised on SSE2 ...
    assert "ymm" not in base.stdout and "zmm" not in base.stdout  # ... and nothing wider
    if _has_avx2():
        assert host.stdout != base.stdout
        assert "ymm" in host.stdout or "zmm" in host.stdout


def test_both_cpus_run_the_same_program_to_the_same_answer(tmp_path):
    src = tmp_path / "vec.cho"
    src.write_text(VECTOR_LOOP)
    for backend in ("jit", "exe"):
        codes = {c: _cancho(["run", "--backend", backend, str(src)], c, tmp_path).returncode
                 for c in ("host", "baseline")}
        assert codes == {"host": 4096 * 7 % 256, "baseline": 4096 * 7 % 256}, (backend, codes)


def test_an_unknown_cpu_is_an_environment_error_not_a_traceback(tmp_path):
    src = tmp_path / "vec.cho"
    src.write_text(VECTOR_LOOP)
    got = _cancho(["asm", str(src)], "pentium", tmp_path)
    assert got.returncode == 3 and "CANCHO_CPU='pentium'" in got.stderr and "Traceback" not in got.stderr


def test_the_build_cache_keys_on_the_cpu(monkeypatch):
    monkeypatch.setenv("CANCHO_CPU", "host")
    host = (cache.object_key("x"), cache.executable_key("x", ["cc"], [], []))
    monkeypatch.setenv("CANCHO_CPU", "baseline")
    base = (cache.object_key("x"), cache.executable_key("x", ["cc"], [], []))
    assert host[0] != base[0] and host[1] != base[1]
    monkeypatch.delenv("CANCHO_CPU")
    assert (cache.object_key("x"), cache.executable_key("x", ["cc"], [], [])) == host  # host is the default


def test_the_jit_identity_keys_on_the_cpu(monkeypatch):
    from cancho_kernel.compiler.backends import mcjit

    monkeypatch.setenv("CANCHO_CPU", "baseline")
    base = mcjit.code_identity()
    monkeypatch.setenv("CANCHO_CPU", "host")
    assert mcjit.code_identity() != base


def test_c_baselines_follow_the_cpu(monkeypatch):
    monkeypatch.setenv("CANCHO_CPU", "baseline")
    base = ["-march=armv8-a"] if platform.machine() == "aarch64" else ["-march=x86-64", "-mtune=generic"]
    assert cpu.cc_flags() == [*base, "-ffp-contract=off"]
    monkeypatch.setenv("CANCHO_CPU", "host")
    assert cpu.cc_flags() == ["-march=native", "-ffp-contract=off"]
