"""The command as a real process: exit codes and the one error line, as a shell sees them.

Every other command test runs in-process (``run_kexp``, click's ``CliRunner``); these
few start ``python -m kexp`` so that what only a process shows is held too.
"""

from __future__ import annotations

from pathlib import Path

from kexp import Store
from tests.conftest import REPO_ROOT, experiment_fields, run_kexp


def test_exit_codes_and_the_one_error_line_of_a_real_process(store: Store, tmp_path: Path) -> None:
    done = run_kexp("top", "-n", "3", cwd=REPO_ROOT, process=True)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 4, done.stderr
    created = store.create_experiment(**experiment_fields())
    assert created.path is not None
    created.path.write_text(created.path.read_text().replace("score: 1.019", "score: fast"))
    done = run_kexp("validate", cwd=store.root, process=True)
    assert done.returncode == 1 and "error[" in done.stdout + done.stderr
    for args, cwd in ((["show", "ffffffff"], store.root), (["top"], tmp_path)):
        done = run_kexp(*args, cwd=cwd, process=True)
        errors = [line for line in done.stderr.splitlines() if line.startswith("kexp: error:")]
        assert done.returncode == 2 and len(errors) == 1, done.stderr
        assert "Traceback" not in done.stderr
