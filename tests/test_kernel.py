"""The kernel against the Jupyter protocol: jupyter_kernel_test's KernelTests with every sample
filled in (each message is validated against the protocol schema).

Samples are chosen so that each test sees exactly what it wants: ``code_generate_error`` is a
refusal, whose only output is the ``error`` message.
"""

from __future__ import annotations

import jupyter_kernel_test
import pytest
from kernel_client import HELLO

STDERR = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {
        write_err(i, "to stderr\\n");
    }
    release(io);
    return 0;
}
"""

RESULT = """// execute-result sample
fn main(world: World) -> [] int {
    release(world);
    return 0;
}
"""


@pytest.mark.usefixtures("cancho_kernelspec")
class TestCanchoKernel(jupyter_kernel_test.KernelTests):
    kernel_name = "cancho"
    language_name = "cancho"
    file_extension = ".cho"

    code_hello_world = HELLO
    code_stderr = STDERR

    completion_samples = [
        {"text": "putc", "matches": {"putchar"}},
        {"text": "write_", "matches": {"write_bytes", "write_err"}},
        {"text": "%%ref", "matches": {"%%refused"}},
        {"text": "fn f[&r](x: &r [byte]) -> [] int { return le", "matches": {"len", "let"}},
    ]

    complete_code_samples = [
        "fn f(x: int) -> [] int { return x; }",
        "%who",
        "fn main(world: World) -> [] int {\n    release(world);\n    return 0;\n}",
        "let c = '{';",
        'let s = "{ not a brace";',
    ]
    incomplete_code_samples = [
        "fn f(x: int) -> [] int {",
        "fn main(world: World) -> [] int {\n    if true {\n",
        "fn g(x: int",
    ]
    invalid_code_samples = [
        "fn f() -> [] int { return 1; }}",
        "fn f() -> [] int { return (1]; }",
        'let s = "never closed',
    ]

    code_page_something = "%doc split"
    code_generate_error = "fn f(x: int) -> [] int {\n    return y;\n}"
    code_execute_result = [{"code": RESULT, "result": "returned 0"}]
    code_display_data = [{"code": "%who", "mime": "text/html"},
                         {"code": "fn shown(x: int) -> [] int { return x; }", "mime": "text/plain"}]
    code_history_pattern = "*execute-result sample*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "putchar"
    code_clear_output = "%clear"
