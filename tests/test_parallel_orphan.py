"""The child :func:`kexp.storage.parallel.in_two_processes` forks ends with its parent
(trial Q02): a Parquet export killed (kill -9) at 100,000 experiments left its child
running for 20 s more, writing into a folder nobody would use."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import textwrap

#: A process sharing work with its child, both stuck (as a long export is, mid-way):
#: each says its pid on stdout, then waits forever. The pipe its first argument names
#: is held open by both: it ends only when both are gone.
SCRIPT = textwrap.dedent(
    r"""
    import os, sys
    import kexp.storage.parallel as parallel

    parallel._forkable = lambda: True
    os.set_inheritable(int(sys.argv[1]), True)
    parent = os.getpid()

    def work(items):
        who = "child" if os.getpid() != parent else "parent"
        os.write(1, f"{who} {os.getpid()}\n".encode())  # one write: lines never mixed
        os.read(os.pipe()[0], 1)  # never answered
        return items

    parallel.in_two_processes(work, [1, 2], 10**6)
    """
)


def test_the_child_ends_when_its_parent_is_killed() -> None:
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(write_end)],
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(write_end,),
    )
    os.close(write_end)
    said: dict[str, str] = {}
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        said.update(line.split() for line in lines)
        assert set(said) == {"parent", "child"}, lines
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        # Both held the pipe: it ends once the child is gone too (bounded: a failure
        # must not hang the suite).
        ready, _, _ = select.select([read_end], [], [], 60)
        assert ready and os.read(read_end, 1) == b"", "the child outlived its parent"
    finally:
        os.close(read_end)
        if process.poll() is None:
            process.kill()
        if said.get("child"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(said["child"]), signal.SIGKILL)
