"""A notebook cell that runs a server and its own client on loopback (issue 14, Deliver 6): the
cell is tests/net/server_and_client.cho, run through the kernel on both backends with the port
(one the operating system picked, released for the program) as its argument. The program ends
by itself once the exchange is done and closes every socket it opened.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kernel_client import run

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

CELL = (Path(__file__).resolve().parent / "net" / "server_and_client.cho").read_text(encoding="utf-8")
EXPECTED = ("client: connect status 0\n"
            "server: accepted 1\n"
            "server: got hello over loopback\n"
            "client: got echo: hello over loopback\n")


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend", ("jit", "exe"))
def test_a_cell_serves_and_dials_itself_on_loopback(kernel, backend: str) -> None:
    cell = run(kernel, f"%%run --backend {backend} --args {free_tcp_port()}\n{CELL}", timeout=120)
    assert cell.status == "ok", cell.outputs
    assert cell.error is None
    assert cell.stream("stdout") == EXPECTED


def test_the_cells_authority_names_the_network(kernel) -> None:
    cell = run(kernel, "%%authority\n" + CELL)
    assert cell.status == "ok", cell.outputs
    shown = cell.shown + cell.stream("stdout")
    performs = shown.split("performs\n", 1)[1].split("\n\n", 1)[0].split("\n")
    for label in ('net_in("")', 'net_out("")', "conn_accept", "conn_read", "conn_write", "poll"):
        assert f"    {label}" in performs, shown
