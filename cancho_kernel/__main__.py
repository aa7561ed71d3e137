"""`python -m cancho_kernel -f CONNECTION_FILE`: start the cancho Jupyter kernel."""

from __future__ import annotations


def main() -> None:
    from ipykernel.kernelapp import IPKernelApp

    from .kernel import CanchoKernel

    IPKernelApp.launch_instance(kernel_class=CanchoKernel)


if __name__ == "__main__":
    main()
