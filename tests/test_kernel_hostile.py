"""Issue 22, finding 10: every request gets a reply, whatever a client sends.

A cell holding a lone surrogate (`"\\ud800"`, legal JSON a browser can send), a string or float
`cursor_pos` in complete/inspect, a string history `start`, fields missing or of the wrong type:
before the fix each got no reply at all (the frontend waits forever, the kernel shows busy). The
messages are sent raw — JSON written with ASCII escapes, signed with the connection's key, as a
browser's frontend would — and each test checks that a reply of the request's own type came,
with `status: error` (or the protocol's empty answer), that `idle` followed, and that the kernel
still runs a cell afterwards.
"""

from __future__ import annotations

import json
import time

import pytest
from kernel_client import HELLO, run, started_kernel

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

REPLY_WAIT = 30.0  # seconds: a missing reply is a failure, not a hang of the suite


@pytest.fixture(scope="module")
def kernel(cancho_kernelspec):
    yield from started_kernel()


def ascii_pack(obj) -> bytes:
    """JSON as a browser writes it: a lone surrogate as its `\\ud800` escape."""
    from jupyter_client.jsonutil import json_default

    return json.dumps(obj, default=json_default, ensure_ascii=True, allow_nan=False).encode("ascii")


def request(kernel, msg_type: str, content: dict) -> tuple[dict, list[str]]:
    """Send ``content`` raw; return the reply and the statuses published for the request."""
    _, kc = kernel
    session = kc.session
    packer = session.pack
    session.pack = ascii_pack
    try:
        msg = session.msg(msg_type, content)
        kc.shell_channel.send(msg)
    finally:
        session.pack = packer
    deadline = time.monotonic() + REPLY_WAIT
    reply = None
    while reply is None:
        left = deadline - time.monotonic()
        assert left > 0, f"no {msg_type} reply"
        m = kc.get_shell_msg(timeout=left)
        if m["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            reply = m
    statuses: list[str] = []
    while "idle" not in statuses:
        left = deadline - time.monotonic()
        assert left > 0, f"no idle after {msg_type}: {statuses}"
        m = kc.get_iopub_msg(timeout=left)
        if m["parent_header"].get("msg_id") == msg["header"]["msg_id"] and m["msg_type"] == "status":
            statuses.append(m["content"]["execution_state"])
    return reply, statuses


def still_alive(kernel) -> None:
    cell = run(kernel, HELLO)
    assert cell.status == "ok" and cell.stream("stdout") == "hello, world\n", cell.outputs


def test_a_lone_surrogate_in_a_cell_gets_an_error_reply(kernel):
    code = 'fn main(world: World) -> [] int {\n    release(world);\n    let s = "a\ud800b";\n    return 0;\n}\n'
    reply, statuses = request(kernel, "execute_request", {"code": code, "silent": False})
    assert reply["msg_type"] == "execute_reply"
    content = reply["content"]
    assert content["status"] == "error", content
    assert "surrogate" in content["evalue"] and "line 3" in content["evalue"], content["evalue"]
    assert statuses == ["busy", "idle"]
    still_alive(kernel)


@pytest.mark.parametrize("msg_type, content", [
    ("complete_request", {"code": "io.wr", "cursor_pos": "5"}),
    ("complete_request", {"code": "io.wr", "cursor_pos": 2.5}),
    ("complete_request", {"code": "io.wr", "cursor_pos": 99}),
    ("complete_request", {"code": "io.wr"}),
    ("complete_request", {"code": "io.wr\ud800", "cursor_pos": 5}),
    ("complete_request", {"cursor_pos": 0}),
    ("inspect_request", {"code": "split", "cursor_pos": "3"}),
    ("inspect_request", {"code": "split", "cursor_pos": 1.0}),
    ("inspect_request", {"code": "split", "cursor_pos": -1}),
    ("inspect_request", {"code": 7, "cursor_pos": 0}),
    ("inspect_request", {"code": "split"}),
    ("is_complete_request", {"code": None}),
    ("is_complete_request", {}),
    ("history_request", {"hist_access_type": "range", "output": False, "raw": True, "start": "1",
                         "stop": 3}),
    ("history_request", {"hist_access_type": "tail", "output": False, "raw": True, "n": "x"}),
    ("history_request", {"hist_access_type": "search", "output": False, "raw": True, "pattern": 5}),
    ("history_request", {"hist_access_type": "range", "bogus": 1}),  # answered: unknown fields are ignored
    ("history_request", {}),
    ("execute_request", {"code": 5}),
    ("execute_request", {}),
    ("execute_request", {"code": "%who", "silent": "no"}),
])
def test_bad_fields_get_a_reply(kernel, msg_type, content):
    reply, statuses = request(kernel, msg_type, content)
    assert reply["msg_type"] == msg_type.replace("_request", "_reply")
    assert statuses == ["busy", "idle"]
    got = reply["content"]
    if msg_type == "is_complete_request":
        assert got["status"] in ("unknown", "invalid"), got
    elif "bogus" in content:
        assert got["status"] == "ok" and isinstance(got["history"], list), got
    else:
        assert got["status"] == "error" and got["evalue"], got
    still_alive(kernel)


def test_good_requests_still_answer_as_before(kernel):
    reply, _ = request(kernel, "complete_request", {"code": "io.wr", "cursor_pos": 5})
    assert reply["content"]["status"] == "ok" and reply["content"]["matches"]
    reply, _ = request(kernel, "history_request", {"hist_access_type": "tail", "output": False,
                                                   "raw": True, "n": 3})
    assert reply["content"]["status"] == "ok"
