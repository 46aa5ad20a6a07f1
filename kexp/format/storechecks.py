"""The checks across a store's files: duplicate ids, ``pid``/``combines`` naming no
experiment, a step measured on another machine than its parent, lineage cycles; on what
:class:`kexp.format.filelinks.FileLinks` keeps of each file. And the warning of a file a
change moved from where kexp put it (``moved-file``)."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kexp.core.advice import LIST_SHOWS, RE_ID
from kexp.core.collector import collector_paused
from kexp.core.problems import Problem, Severity
from kexp.core.spelling import usual_spelling
from kexp.format.filelinks import FileLinks
from kexp.format.rules import folded_env, id_from_name, spelt_otherwise_effect
from kexp.format.validate import CheckedFile, read_and_check


@dataclasses.dataclass(frozen=True)
class Finding:
    """A problem of a file found across files, before its line and column are known:
    those of the front-matter value at ``where`` in the file numbered ``file``."""

    file: int
    where: tuple[str | int, ...]
    code: str
    field: str
    message: str
    hint: str
    severity: Severity = "error"

    def problem(self, path: str, line: int, column: int) -> Problem:
        """The problem, in the file ``path`` at (``line``, ``column``)."""
        fields = (self.code, self.field, self.message, self.hint)
        return Problem(path, line, column, self.severity, *fields)


@collector_paused()  # a few entries a file, none in a cycle
def moved_problem(path: str, old: str, new: str) -> Problem:
    """The ``moved-file`` warning of an experiment file a change moved (or renamed) to
    ``path``, from where kexp had put it: ``old`` and ``new`` are its paths before and
    after from the repository's root, and the move that puts it back is said with them.
    The path chosen at creation stays, as a branch adding a file to the folder it left
    meets git's directory-rename detection when it merges."""
    folder = os.path.dirname(old)
    back = f"git mv {shlex.quote(new)} {shlex.quote(old)}"
    return Problem(
        path,
        1,
        1,
        "warning",
        "moved-file",
        "",
        f"the change moved the file from {old}, where kexp put it: an experiment's path is "
        "chosen once and stays, or a branch adding a file to the folder it left gets "
        "CONFLICT (file location) when it merges (git's directory-rename detection)",
        f"move it back, from the repository's root ("
        f"{f'mkdir -p {shlex.quote(folder)} && ' if folder else ''}{back}), and commit the move",
    )


def store_findings(
    items: Sequence[FileLinks],
    known_ids: Mapping[str, Sequence[Path | str]] | None = None,
    outside_pid: Callable[[str], str | None] | None = None,
    gone: Mapping[str, str] | None = None,
) -> list[Finding]:
    """The problems across files of ``items`` (numbered by their place in it): duplicate
    ids, ``pid``/``combines`` naming no experiment, lineage cycles, in that order.

    ``known_ids`` maps every id in the store to its files (default: the ids of
    ``items``); ``outside_pid(id)`` is the ``pid`` written in the first file of an id of
    ``known_ids`` that no item holds (default: none), so that a loop through a file that
    is not checked is found too; ``gone`` says of removed ids what they are (read across
    refs: ``was removed on origin/kexp/bob``). The store-wide half of :func:`check_store`, on what
    :class:`FileLinks` keeps of each file instead of whole documents; its memory is a
    few entries a file, and its time in proportion to the number of files.
    """
    findings: list[Finding] = []
    # The first item of each id, and every item of the ids several items hold (few).
    first: dict[str, int] = {}
    shared: dict[str, list[int]] = {}
    for number, item in enumerate(items):
        if item.id is not None and first.setdefault(item.id, number) != number:
            shared.setdefault(item.id, [first[item.id]]).append(number)
    ids: Mapping[str, object] = known_ids if known_ids is not None else first
    # The ids of files in the store whose id cannot be read (not UTF-8, no front-matter):
    # their own error is reported; what names them names an experiment that is there.
    unreadable = {
        exp_id for item in items if item.id is None and (exp_id := id_from_name(item.path))
    }
    if known_ids is None:  # only an id of several items can be duplicated
        candidates = sorted(shared.items(), key=lambda entry: entry[1][0])
    else:
        candidates = [(key, shared.get(key) or [number]) for key, number in first.items()]
    for exp_id, numbers in candidates:
        written = {str(p) for p in known_ids.get(exp_id, [])} if known_ids is not None else set()
        paths = sorted(written | {items[n].path for n in numbers})
        if len(paths) > 1:
            for number in numbers:
                own = items[number].path
                others = ", ".join(p for p in paths if p != own)
                findings.append(
                    Finding(
                        number,
                        ("id",),
                        "duplicate-id",
                        "id",
                        f"id {exp_id} is also used by {others}",
                        "a copied file, or two branches that made the same id: give one "
                        "file a new id and the name that goes with it (for this one: "
                        f"{RE_ID.say(path=shlex.quote(str(own)))})",
                    )
                )
    for number, item in enumerate(items):
        pid = item.pid
        if pid is not None and pid not in ids and pid not in unreadable:
            if gone and pid in gone:  # read across refs: a newer place removed it
                said = f"parent {pid} {gone[pid]}"
                hint = "build on another parent, or set pid: '' if the step stands alone"
            else:
                said = f"parent {pid} is not in the store"
                hint = (
                    f"fix the id ({LIST_SHOWS} them), or set pid: '' if the parent was "
                    "never recorded"
                )
            findings.append(Finding(number, ("pid",), "dangling-pid", "pid", said, hint))
        for index, other in enumerate(item.combines):
            if other is not None and other not in ids and other not in unreadable:
                findings.append(
                    Finding(
                        number,
                        ("combines", index),
                        "dangling-combines",
                        f"combines.{index}",
                        f"combined experiment {other} is not in the store",
                        "list only ids of recorded experiments",
                    )
                )
        parent = first.get(item.pid) if item.pid is not None else None
        if parent is not None and item.env is not None and not item.on_reference:
            finding = _env_finding(number, item.env, item.pid or "", items[parent].env)
            if finding is not None:
                findings.append(finding)
    findings.extend(_spelling_findings(items))
    # The parent of an id: the pid of the last of its items whose pid names a known id.
    parents: dict[str, str | None] = {}
    for exp_id, numbers in shared.items():
        named = [items[n].pid for n in numbers if items[n].pid is not None]
        known = [pid for pid in named if pid in ids]
        parents[exp_id] = known[-1] if known else None
    outside: dict[str, str | None] = {}

    def parent_of(exp_id: str) -> str | None:
        number = first.get(exp_id)
        if number is not None:
            if exp_id in parents:
                return parents[exp_id]
            pid = items[number].pid
            return pid if pid is not None and pid in ids else None
        if exp_id not in outside:
            outside[exp_id] = (
                outside_pid(exp_id) if outside_pid is not None and exp_id in ids else None
            )
        return outside[exp_id]

    if outside_pid is None:
        # A loop cannot only go down: some pid in it sorts at or after its own id. A
        # parent is made before its child, and kexp's ids sort by time, so few do: the
        # walks start at those.
        starts = [item for item in items if item.pid is not None and item.pid >= (item.id or "")]
    else:  # a loop may go up only through ids no item holds
        starts = list(items)
    findings.extend(_cycle_findings(items, starts, first, parent_of))
    return findings


def _env_finding(number: int, env: str, pid: str, parents: str | None) -> Finding | None:
    """The ``env-differs-from-parent`` warning of the item ``number``, a step measured
    on ``env`` whose parent ``pid`` was measured on ``parents`` (None: not known); none
    for the parent's env spelt otherwise (:func:`folded_env`: one machine, which the
    ``env-spelt-otherwise`` warning names)."""
    if parents is None or folded_env(env) == folded_env(parents):
        return None
    return Finding(
        number,
        ("env",),
        "env-differs-from-parent",
        "env",
        f"env {env.strip()!r} is not its parent {pid}'s ({parents.strip()!r}): the "
        "cumulative score multiplies scores measured on two machines",
        "measure the parent's code on this machine and make that record the pid, or set "
        "pid: '' to start from the reference (and measure against it)",
        "warning",
    )


def _spelling_findings(items: Sequence[FileLinks]) -> list[Finding]:
    """The ``env-spelt-otherwise`` warning of each item whose env is another spelling
    (case, punctuation and spaces aside: :func:`folded_env`) of an env the items write
    more often (among as many, the one stats and context show the campaign by:
    :func:`~kexp.core.spelling.usual_spelling`): a campaign of its own to stats, tree
    and review, or one they write two ways (:func:`spelt_otherwise_effect`)."""
    spellings: dict[str, list[str]] = {}
    for item in items:
        if item.env and item.env.strip():
            spellings.setdefault(folded_env(item.env), []).append(item.env.strip())
    usual = {
        key: usual_spelling("env", seen) for key, seen in spellings.items() if len(set(seen)) > 1
    }
    found: list[Finding] = []
    for number, item in enumerate(items):
        env = (item.env or "").strip()
        spelt = usual.get(folded_env(env)) if env else None
        if spelt is not None and env != spelt:
            found.append(
                Finding(
                    number,
                    ("env",),
                    "env-spelt-otherwise",
                    "env",
                    f"env {env!r} is {spelt!r} spelt otherwise: "
                    + spelt_otherwise_effect(env, spelt),
                    f"if it is that machine, write env: {spelt!r}",
                    "warning",
                )
            )
    return found


def _cycle_findings(
    items: Sequence[FileLinks],
    starts: Sequence[FileLinks],
    first: Mapping[str, int],
    parent_of: Callable[[str], str | None],
) -> list[Finding]:
    """A ``lineage-cycle`` finding for every item whose ``pid`` chain (``parent_of``:
    one parent an id) leads back to its own id, naming the loop from it.

    The chains are followed from the items ``starts`` (every loop passes through one of
    them), each id's once: the ids on it are marked as on a loop or not (``first``
    numbers the ids of items), so a store of long lineages costs time in proportion to
    its size.
    """
    unknown, clear, on_loop = 0, 1, 2
    state = bytearray(len(items))  # by the number of the first item of an id
    outside: dict[str, int] = {}  # ids no item holds

    def state_of(exp_id: str) -> int:
        number = first.get(exp_id)
        return state[number] if number is not None else outside.get(exp_id, unknown)

    for item in starts:
        if item.id is None or state[first[item.id]] != unknown:
            continue
        walked: dict[str, int] = {}
        current: str | None = item.id
        while current is not None and current not in walked and state_of(current) == unknown:
            walked[current] = len(walked)
            current = parent_of(current)
        loop_from = walked.get(current, len(walked)) if current is not None else len(walked)
        for place, exp_id in enumerate(walked):
            mark = on_loop if place >= loop_from else clear
            number = first.get(exp_id)
            if number is not None:
                state[number] = mark
            else:
                outside[exp_id] = mark
    findings: list[Finding] = []
    if on_loop not in state:
        return findings
    for number, item in enumerate(items):
        if item.id is None or state[first[item.id]] != on_loop:
            continue
        chain = [item.id]
        current = parent_of(item.id)
        while current is not None and current != item.id:
            chain.append(current)
            current = parent_of(current)
        findings.append(
            Finding(
                number,
                ("pid",),
                "lineage-cycle",
                "pid",
                f"the pid chain loops back to this experiment: {' -> '.join([*chain, item.id])}",
                "a parent must be an earlier experiment: fix one pid in the loop",
            )
        )
    return findings


def check_store(
    checked: Sequence[CheckedFile], known_ids: Mapping[str, Sequence[Path]] | None = None
) -> list[Problem]:
    """Problems across files: duplicate ids, dangling ``pid``/``combines``, cycles.

    ``checked`` are the files to report on; ``known_ids`` maps every id in the store to
    its files (defaults to the ids of ``checked``).
    """
    items = [
        FileLinks.of(str(c.path), c.document.fields if c.document is not None else None)
        for c in checked
    ]

    def outside_pid(exp_id: str) -> str | None:
        # A file that is not being checked (kexp validate FILE): read its pid.
        return _pid_in(known_ids.get(exp_id, []) if known_ids is not None else [])

    problems: list[Problem] = []
    for finding in store_findings(items, known_ids, outside_pid):
        document = checked[finding.file].document
        assert document is not None
        problems.append(
            finding.problem(items[finding.file].path, *document.position(finding.where))
        )
    return problems


def _pid_in(paths: Sequence[Path]) -> str | None:
    """The parent id written in the first of ``paths`` (None if none or unreadable)."""
    if not paths:
        return None
    doc = read_and_check(Path(paths[0])).document
    pid = doc.fields.get("pid") if doc is not None else None
    return pid if isinstance(pid, str) and pid else None
