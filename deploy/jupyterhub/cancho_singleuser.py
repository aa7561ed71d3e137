"""Imported by each user's single-user server (its PYTHONPATH holds this directory; the kernel's
does not: it runs Python with -I).

jupyter_client's ``KernelSpecManager.allowed_kernelspecs`` only filters the *list* of kernelspecs:
``POST /api/kernels {"name": "python3"}`` still starts Python, which would end safe mode. This
manager refuses a kernel outside the allowed set by name as well.
"""

from __future__ import annotations

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel


class CourseKernelSpecManager(KernelSpecManager):
    """Only the allowed kernelspecs exist: listed, looked up or started."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if self.allowed_kernelspecs and kernel_name not in self.allowed_kernelspecs:
            raise NoSuchKernel(kernel_name)
        return super().get_kernel_spec(kernel_name)
