"""`python -m cancho_kernel -f CONNECTION_FILE`: start the cancho Jupyter kernel."""

from __future__ import annotations


def main() -> None:
    from ipykernel.kernelapp import IPKernelApp

    from .kernel import CanchoKernel

    class CanchoKernelApp(IPKernelApp):
        """ipykernel's application without the IOPub pipe for forked Python children: a loopback
        TCP port any local user could reach, which a kernel of cancho, forking no Python child
        that prints, never uses (with the ipc transport a hub's kernel then listens on no TCP port:
        docs/teaching.md)."""

        def init_iopub(self, context) -> None:
            super().init_iopub(context)
            thread = self.iopub_thread
            pipe = getattr(thread, "_pipe_in", None)
            if pipe is not None:
                thread._pipe_flag = False
                pipe.close()

    CanchoKernelApp.launch_instance(kernel_class=CanchoKernel)


if __name__ == "__main__":
    main()
