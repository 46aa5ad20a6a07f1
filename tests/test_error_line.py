"""The line of an error message that says what went wrong, as lessons and context show
it beside a failure recorded without a key insight.

The trial: a Triton CompilationError's first line is ``...CompilationError: at 10:11:``
(where, not what); the cause (``TypeError("reduce() got an unexpected keyword argument
'dtype'")``) is its last, after the kernel's source and a caret. ``kexp lessons`` and
``kexp context`` showed "at 10:11:".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp

from kexp.format.fileformat import error_line

#: As Triton 3 writes it (triton/compiler/errors.py: "at LINE:COL:", up to 12 lines of
#: the kernel's source, a caret under the column, then repr() of the cause).
TRITON = """\
triton.compiler.errors.CompilationError: at 10:11:
def online_softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    y = tl.full([BLOCK], 1.0, tl.float32)

    m, d = tl.reduce((x, y), 0, combine, dtype=tl.bfloat16)
           ^
TypeError("reduce() got an unexpected keyword argument 'dtype'")
"""
TRITON_CAUSE = "TypeError(\"reduce() got an unexpected keyword argument 'dtype'\")"
#: The same error as a Python process prints it: the chained traceback first.
TRITON_TRACEBACK = f"""\
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/triton/language/core.py", line 35, in wrapper
    return fn(*args, **kwargs)
TypeError: reduce() got an unexpected keyword argument 'dtype'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/bench_softmax.py", line 61, in <module>
    y = softmax(x)
  File "/opt/venv/lib/python3.11/site-packages/triton/compiler/compiler.py", line 276, in compile
    module = src.make_ir(options, codegen_fns, module_map, context)
{TRITON}"""
#: Older Triton: the source and the caret, no cause after them (it is chained above).
TRITON_NO_CAUSE = TRITON_TRACEBACK.replace(TRITON_CAUSE + "\n", "")
#: The trial's paste: the header line, then the cause.
TRITON_SHORT = f"triton.compiler.errors.CompilationError: at 10:11:\n{TRITON_CAUSE}\n"
PYTHON = """\
Traceback (most recent call last):
  File "/work/bench_softmax.py", line 48, in <module>
    out = softmax(x)
  File "/work/softmax.py", line 30, in softmax
    kernel[grid](y, x, x.stride(0), n_cols, BLOCK=BLOCK)
RuntimeError: CUDA error: an illegal memory access was encountered
"""
#: nvcc: a warning before the error, a count after it.
NVCC = """\
csrc/softmax.cu(12): warning #177-D: variable "lane" was declared but never referenced

csrc/softmax.cu(57): error: identifier "__shfl_xor" is undefined

1 error detected in the compilation of "csrc/softmax.cu".
"""
HIPCC = """\
In file included from csrc/softmax.hip:3:
csrc/softmax.hip:57:17: error: use of undeclared identifier '__shfl_xor_sync'
   57 |     float v = __shfl_xor_sync(0xffffffff, x, 16);
      |               ^
1 error generated when compiling for gfx942.
"""
PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas error   : Entry function '_Z7softmaxPf' uses too much shared data (0x12000 bytes, 0xc000 max)
"""


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (TRITON, TRITON_CAUSE),
        (TRITON_TRACEBACK, TRITON_CAUSE),
        (TRITON_NO_CAUSE, "TypeError: reduce() got an unexpected keyword argument 'dtype'"),
        # The header and the cause pasted without the source and caret between.
        (TRITON_SHORT, TRITON_CAUSE),
        (TRITON_SHORT.replace(TRITON_CAUSE, "reduce() got an unexpected keyword"),
         "reduce() got an unexpected keyword"),
        (PYTHON, "RuntimeError: CUDA error: an illegal memory access was encountered"),
        (NVCC, 'csrc/softmax.cu(57): error: identifier "__shfl_xor" is undefined'),
        (HIPCC, "csrc/softmax.hip:57:17: error: use of undeclared identifier '__shfl_xor_sync'"),
        (PTXAS, PTXAS.splitlines()[1]),
        # A message of one's own: its first line, as before.
        ("Wrong results at config b8\nmax error: 0.31 (atol 1e-3)\n", "Wrong results at config b8"),
        ("", ""),
    ],
    ids=["triton", "triton-traceback", "triton-no-cause", "triton-short", "triton-short-bare",
         "python", "nvcc", "hipcc", "ptxas", "own-words", "empty"],
)  # fmt: skip
def test_the_line_that_says_the_cause(message: str, line: str) -> None:
    assert error_line(message) == line


@pytest.mark.parametrize("message", [TRITON, TRITON_SHORT], ids=["whole", "header-and-cause"])
def test_lessons_and_context_show_a_triton_errors_cause(repo: Path, message: str) -> None:
    (repo / "err.txt").write_text(message, encoding="utf-8")
    added = run_kexp(
        "add", "--summary", "bf16 combine - compile error", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100", "--score", "0", "--status", "failed", "--buggy",
        "--error-file", "err.txt", "--description", "**Approach**: x", cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    context = run_kexp(
        "context", "--operator", "k.py", "--dtype", "fp16", "--env", "H100", cwd=repo,
        process=True,
    )  # fmt: skip
    lessons = run_kexp("lessons", "--json", cwd=repo, process=True)

    assert f"  error: {TRITON_CAUSE}" in context.stdout.splitlines(), context.stdout
    (lesson,) = json.loads(lessons.stdout)["buggy"]
    assert lesson["error"] == TRITON_CAUSE
