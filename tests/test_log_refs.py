"""``kexp log ID --refs/--all-refs``: the audit trail of an experiment includes the
corrections other refs hold (a teammate's, published with ``kexp sync --branch`` and
fetched), each with its ref; without them, a warning names those refs. Real git: a bare
repository on disk as the remote, two clones, real ``kexp`` processes."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store


def _corrected_on_a_branch(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Alice's experiment (1.10) on main; Hana corrected it to 1.05 (with a reason) and
    published that to ``kexp/human``, and recorded one more there; Alice fetched:
    (alice, hana, the experiment's id, the id only kexp/human holds)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    made = record(alice, base, "Block swizzle for L2 reuse - +10%", score=1.10)
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    hana = clone(remote, tmp_path / "hana")
    fixed = run_kexp(
        "update", made.id, "--set", "score=1.05", "--reason", "warm-L2 run", cwd=hana,
        process=True,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    other = record(hana, base, "Split-K for skinny shapes - +4%", score=1.04)
    assert run_kexp("sync", "--branch", "kexp/human", cwd=hana, process=True).returncode == 0
    git(alice, "fetch", "-q")
    return alice, hana, made.id, other.id


def test_log_all_refs_shows_a_teammates_correction_with_its_ref(tmp_path: Path) -> None:
    """Before: ``kexp log ID --all-refs`` was refused (no such option), and ``kexp log
    ID`` showed the 'added' commit alone, no word of the correction on
    origin/kexp/human."""
    alice, _, exp_id, _ = _corrected_on_a_branch(tmp_path)
    plain = run_kexp("log", exp_id[:10], cwd=alice, process=True)
    assert plain.returncode == 0, plain.stderr
    assert "1.05" not in plain.stdout  # the history of HEAD, as before
    warned = [line for line in plain.stderr.splitlines() if "origin/kexp/human" in line]
    assert len(warned) == 1 and f"kexp log {exp_id[:10]} --all-refs" in warned[0], plain.stderr
    for options in (["--all-refs"], ["--refs", "origin/kexp/*"]):
        done = run_kexp("log", exp_id[:10], *options, "--json", cwd=alice, process=True)
        assert done.returncode == 0, done.stderr
        entries = json.loads(done.stdout)
        assert [(e["action"], e["refs"]) for e in entries] == [
            ("added", []),
            ("modified", ["origin/kexp/human"]),
        ], entries
        assert entries[1]["changes"]["score"] == {"old": 1.1, "new": 1.05}
        assert entries[1]["commit"] == git(alice, "rev-parse", "origin/kexp/human")
    text = run_kexp("log", exp_id[:10], "--all-refs", cwd=alice, process=True)
    assert "    on origin/kexp/human (not in HEAD)" in text.stdout.splitlines(), text.stdout
    assert "score: 1.1 → 1.05" in text.stdout
    main_only = run_kexp("log", exp_id[:10], "--refs", "origin/main", "--json", cwd=alice)
    assert [e["action"] for e in json.loads(main_only.stdout)] == ["added"]
    # The Python twin reads as the command does.
    across = Store(alice, all_refs=True).history(exp_id[:10])
    assert [(e.action, list(e.refs)) for e in across] == [
        ("added", []),
        ("modified", ["origin/kexp/human"]),
    ]


def test_log_all_refs_reads_an_experiment_only_a_ref_holds(tmp_path: Path) -> None:
    """An id only Hana's branch holds: its history there, with its ref; --rev with
    --all-refs is one line of usage error."""
    alice, _, _, other = _corrected_on_a_branch(tmp_path)
    done = run_kexp("log", other[:10], "--all-refs", "--json", cwd=alice, process=True)
    assert done.returncode == 0, done.stderr
    assert [(e["action"], e["refs"]) for e in json.loads(done.stdout)] == [
        ("added", ["origin/kexp/human"])
    ]
    both = run_kexp("log", other[:10], "--rev", "HEAD", "--all-refs", cwd=alice, process=True)
    assert both.returncode == 2 and "give --rev or --refs/--all-refs, not both" in both.stderr
    assert "Traceback" not in both.stderr


def test_log_says_a_removal_on_another_ref_is_a_removal(tmp_path: Path) -> None:
    """Hana removes Alice's experiment (kexp rm) and publishes that to kexp/hana: Alice's
    plain ``kexp log`` says origin/kexp/hana removes it, and ``--all-refs`` marks the
    removal as on that ref (before: 'a newer version: a correction published there',
    and the removal with no word of its ref, as if HEAD held it)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    made = record(alice, base, "Block swizzle for L2 reuse - +10%", score=1.10)
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    hana = clone(remote, tmp_path / "hana")
    assert run_kexp("rm", "-y", made.id, cwd=hana, process=True).returncode == 0
    assert run_kexp("sync", "--branch", "kexp/hana", cwd=hana, process=True).returncode == 0
    git(alice, "fetch", "-q")
    plain = run_kexp("log", made.id[:10], cwd=alice, process=True)
    assert plain.returncode == 0, plain.stderr
    warned = [line for line in plain.stderr.splitlines() if "origin/kexp/hana" in line]
    assert len(warned) == 1 and "removes it" in warned[0], plain.stderr
    assert "correction" not in warned[0], warned[0]
    text = run_kexp("log", made.id[:10], "--all-refs", cwd=alice, process=True)
    lines = text.stdout.splitlines()
    removal = next(i for i, line in enumerate(lines) if line.startswith("    removed in "))
    assert lines[removal + 1] == "    on origin/kexp/hana (not in HEAD)", text.stdout
