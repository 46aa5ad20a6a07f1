"""A dead end tried again with a comment on its changed line is tried before.

Agent A records a knob change (one line of a Triton kernel) that did not pay; agent B,
on a newer base, makes the same change with a comment after it: the comment is no part
of what was tried, so ``kexp add --diff-from-git --all-refs`` warns naming A's
experiment, and a change of the value itself (a comment alike) does not. Real git: a
bare repository on disk as the remote, two clones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote

from kexp.storage.dedupe import code_key

KERNEL = """\
import triton
import triton.language as tl

BLOCK_M = 128
BLOCK_N = 64
NUM_WARPS = 4
SMEM_STAGE = False
NUM_STAGES = 2
EVEN_K = True
"""


def add(clone_root: Path, summary: str, score: str, *more: str) -> tuple[str, str]:
    """``kexp add --diff-from-git`` of the clone's working tree: its id and stderr."""
    result = run_kexp("add", "--summary", summary, "--score", score,
                      "--operator", "kernels/attn.py: attn_fwd", "--dtype", "fp16",
                      "--env", "H100, CUDA 12.4", "--diff-from-git", "--json", *more,
                      cwd=clone_root)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["id"], result.stderr


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("line", "warned"),
    [
        ("SMEM_STAGE = True  # double buffered", True),
        ("SMEM_STAGE = True  # 'double' buffered: \"2 x\" smem", True),
        ("SMEM_STAGE = 2  # double buffered", False),
    ],
)
def test_a_dead_end_with_a_comment_on_its_line_is_tried_before(
    tmp_path: Path, line: str, warned: bool
) -> None:
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    (alice / "kernels").mkdir()
    (alice / "kernels" / "attn.py").write_text(KERNEL)
    git(alice, "add", "kernels")
    git(alice, "commit", "-q", "-m", "attention kernel")
    git(alice, "push", "-q", "origin", "main")
    bob = clone(remote, tmp_path / "bob")

    # Alice's dead end, synced.
    edit(alice / "kernels" / "attn.py", "SMEM_STAGE = False", "SMEM_STAGE = True")
    hers, _ = add(alice, "Stage K/V in shared memory - -3%", "0.97")
    git(alice, "checkout", "-q", "--", "kernels")
    assert run_kexp("sync", cwd=alice).returncode == 0

    # Bob, on a newer base (a line near it edited upstream), the same line commented.
    edit(bob / "kernels" / "attn.py", "NUM_WARPS = 4", "NUM_WARPS = 8")
    git(bob, "commit", "-q", "-am", "eight warps")
    git(bob, "fetch", "-q")
    edit(bob / "kernels" / "attn.py", "SMEM_STAGE = False", line)
    _, stderr = add(bob, "Double-buffered shared-memory staging - -2%", "0.98", "--all-refs")

    assert (hers in stderr) == warned, stderr
    if warned:
        assert "tried in" in stderr or "near-duplicate" in stderr, stderr


PY_DIFF = """\
diff --git a/kernels/attn.py b/kernels/attn.py
--- a/kernels/attn.py
+++ b/kernels/attn.py
@@ -5,3 +5,3 @@
 NUM_WARPS = 4
-SMEM_STAGE = False
+SMEM_STAGE = True
 NUM_STAGES = 2
"""
CU_DIFF = """\
--- a/csrc/kernel.cu
+++ b/csrc/kernel.cu
@@ -10,3 +10,4 @@
   const int n = size;
+#pragma unroll 4
   for (int i = 0; i < n; ++i) {
-    printf("x # y");
+    printf("x # y // z");
"""


@pytest.mark.parametrize(
    ("diff", "old", "new", "same"),
    [
        # Python: a trailing comment and a whole comment line are no part of the change.
        (PY_DIFF, "+SMEM_STAGE = True\n", "+SMEM_STAGE = True  # double buffered\n", True),
        (PY_DIFF, "+SMEM_STAGE = True\n", "+SMEM_STAGE = True\n+    # why: fewer loads\n", True),
        # ... a '#' in a string is
        (PY_DIFF, "+SMEM_STAGE = True\n", '+SMEM_STAGE = "#True"\n', False),
        # CUDA: // and /* */ comments are not; #pragma and a string's "//" are code.
        (CU_DIFF, "+#pragma unroll 4\n", "+#pragma unroll 4 // four\n", True),
        (CU_DIFF, "+#pragma unroll 4\n", "+#pragma unroll 4 /* four */\n", True),
        (CU_DIFF, "+#pragma unroll 4\n", "+// #pragma unroll 8\n+#pragma unroll 4\n", True),
        (CU_DIFF, "+#pragma unroll 4\n", "+#pragma unroll 8\n", False),
        (CU_DIFF, "// z", "// w", False),
        # A change of comments alone keeps them: two such changes are two.
        (
            PY_DIFF.replace("+SMEM_STAGE = True\n", "+# one\n").replace(
                "-SMEM_STAGE = False\n", ""
            ),
            "+# one",
            "+# two",
            False,
        ),
        # A file of another language keeps its '#' and '//'.
        (PY_DIFF.replace("attn.py", "attn.txt"), "True\n", "True # x\n", False),
    ],
)
def test_comments_of_the_files_language_are_no_part_of_the_code_key(
    diff: str, old: str, new: str, same: bool
) -> None:
    assert old in diff
    assert (code_key(diff) == code_key(diff.replace(old, new))) == same
