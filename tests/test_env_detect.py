"""The env kexp detects is the same whatever ``PATH`` kexp was started with: an MCP
client or a CI job starts ``kexp`` with a shorter ``PATH`` than the engineer's shell,
and an env that lost its ``CUDA 12.4`` there would start a campaign of its own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

NVCC = """#!/bin/sh
echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Cuda compilation tools, release 12.4, V12.4.131"
"""


def detected(env: dict[str, str], cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "kexp", "env", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_cuda_toolkit_off_path_is_found_in_its_folder(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda-12.4"
    (toolkit / "bin").mkdir(parents=True)
    nvcc = toolkit / "bin" / "nvcc"
    nvcc.write_text(NVCC, encoding="utf-8")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "KEXP_"))}
    plain = os.pathsep.join(("/usr/bin", "/bin"))
    # The engineer's shell: the toolkit's bin on PATH.
    shell = detected({**base, "PATH": os.pathsep.join((str(toolkit / "bin"), plain))}, tmp_path)
    # The MCP client's: a short PATH, the toolkit named by CUDA_HOME as installers set it.
    client = detected({**base, "PATH": plain, "CUDA_HOME": str(toolkit)}, tmp_path)
    assert shell["cuda"] == "12.4", shell
    assert client == shell
