"""``kexp sync``'s merges in the store's fan-out layout (``experiments/YYYY/MM/xx/``, ``xx``
the id's last two hex digits): experiment files never move by folder, so the merge kexp
makes never lets git's directory-rename detection move one. Real git: a bare repository
on disk as the remote, two clones."""

from __future__ import annotations

from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids

from kexp import Store

WHEN = "2026-12-06T10:00:00.000000Z"


def path_in(remote: Path, exp_id: str) -> str:
    """The path of ``exp_id``'s file in the remote's main."""
    listing = git(remote, "ls-tree", "-r", "--name-only", "main", "--", "experiments")
    return next(line for line in listing.splitlines() if f"/{exp_id}-" in line)


def test_a_shard_folder_emptied_on_one_side_keeps_the_file_the_other_side_added(
    tmp_path: Path,
) -> None:
    """Alice removes the only experiment of its shard folder (``kexp rm``) and records
    one much like it in another folder: to git, a rename, and so the folder renamed.
    Meanwhile Bob records an experiment whose id falls in that folder and syncs first.
    Alice's ``kexp sync`` merges his work in: his file stays where kexp put it (git's
    directory-rename detection would move it into Alice's folder, and stop the merge
    with "CONFLICT (file location)"), and both experiments reach main."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    first = record(alice, base, "Vectorize loads float4 - +12%", score=1.12,
                   id="6753000000000aab", created_at=WHEN)  # fmt: skip
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=bob).returncode == 0

    Store(alice).remove_experiment(first.id)
    again = record(alice, base, "Vectorize loads float4 - +11%", score=1.11,
                   id="6753000000000bcd", created_at=WHEN)  # fmt: skip
    theirs = record(bob, base, "Warp reduce via shfl - +5%", score=1.05,
                    id="6753000000000cab", created_at=WHEN)  # fmt: skip
    assert path_in(remote, first.id).split("/")[3] == "ab"
    assert run_kexp("sync", cwd=bob).returncode == 0
    where = path_in(remote, theirs.id)

    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert sorted(remote_ids(remote)) == sorted([again.id, theirs.id])
    assert path_in(remote, theirs.id) == where
    assert run_kexp("validate", cwd=alice).returncode == 0


def test_a_correction_of_an_experiment_removed_elsewhere_is_a_conflict_not_moved(
    tmp_path: Path,
) -> None:
    """Alice removes X and records Y, much like it (to git, a rename); Bob corrects X.
    Bob's ``kexp sync`` applied his correction to Alice's Y, silently (git's rename
    detection in the merge): it stops instead, naming X, and Y is as Alice made it."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    gone = record(alice, base, "Unroll 4 - +2%", score=1.02, created_at=WHEN)
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=bob).returncode == 0
    Store(alice).remove_experiment(gone.id)
    kept = record(alice, base, "Unroll 4 again - +2%", score=1.02, created_at=WHEN)
    assert run_kexp("sync", cwd=alice).returncode == 0
    made = git(remote, "show", f"main:{path_in(remote, kept.id)}")
    corrected = run_kexp("update", gone.id, "--set", "dtype_sig=fp16", "--reason",
                         "was measured in fp16", cwd=bob)  # fmt: skip
    assert corrected.returncode == 0, corrected.stderr

    done = run_kexp("sync", cwd=bob)
    assert done.returncode != 0
    assert gone.id in done.stderr and "removed on one side" in done.stderr, done.stderr
    assert git(remote, "show", f"main:{path_in(remote, kept.id)}") == made

    # The removal kept, as the one line says, run as printed.
    follow(done.stderr, r"to keep origin/main's removal of .*?, run (.*?) and kexp sync", bob)
    assert run_kexp("sync", cwd=bob).returncode == 0
    assert remote_ids(remote) == [kept.id]
    assert git(remote, "show", f"main:{path_in(remote, kept.id)}") == made


def test_a_removal_of_an_experiment_corrected_elsewhere_is_a_conflict_settled_as_said(
    tmp_path: Path,
) -> None:
    """The other way round: Bob's correction of X is on main first; Alice removed X and
    recorded Y much like it. Her sync stops, and the correction taken as the line says
    (run as printed) is published with Y; X stays until removed again."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    gone = record(alice, base, "Unroll 4 - +2%", score=1.02, created_at=WHEN)
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=bob).returncode == 0
    corrected = run_kexp("update", gone.id, "--set", "dtype_sig=fp16", "--reason",
                         "was measured in fp16", cwd=bob)  # fmt: skip
    assert corrected.returncode == 0, corrected.stderr
    assert run_kexp("sync", cwd=bob).returncode == 0
    Store(alice).remove_experiment(gone.id)
    kept = record(alice, base, "Unroll 4 again - +2%", score=1.02, created_at=WHEN)

    done = run_kexp("sync", cwd=alice)
    assert done.returncode != 0
    assert gone.id in done.stderr and "removed on one side" in done.stderr, done.stderr
    follow(done.stderr, r"to take origin/main's correction of .*?, run (.*?) and kexp sync", alice)
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert sorted(remote_ids(remote)) == sorted([gone.id, kept.id])
    assert "dtype_sig: fp16" in git(remote, "show", f"main:{path_in(remote, gone.id)}")
    assert "dtype_sig: bf16" in git(remote, "show", f"main:{path_in(remote, kept.id)}")


def follow(said: str, pattern: str, cwd: Path) -> None:
    """Run the command ``said`` names (the group of ``pattern``) as printed, in ``cwd``."""
    import re
    import subprocess

    command = re.search(pattern, said)
    assert command is not None, said
    subprocess.run(["bash", "-c", command.group(1)], cwd=cwd, check=True)
