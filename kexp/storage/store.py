"""The store: a folder holding ``experiments/``, queried and written safely.

A :class:`Store` reads as its base :class:`kexp.storage.reader.StoreReader` does (through a
source, one query pipeline, one validation scan) and writes through :mod:`kexp.storage.atomic`:
creates never overwrite (the new file is linked into place only if its name is free);
updates hold a per-experiment lock, re-read, validate, and replace atomically. Nothing
is written outside ``experiments/`` and the git-ignored cache folder ``.kexp/``.

Where a store is and making one (:func:`find_root`, :func:`init_store`, ``CACHE_DIR``)
are :mod:`kexp.storage.location`'s; they are named here too, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core import ids
from kexp.core.advice import RE_ID, RE_ID_FORCE
from kexp.core.errors import (
    DeleteRefusedError,
    ExperimentExistsError,
    ExperimentNotFoundError,
    KexpError,
    ValidationError,
)
from kexp.core.model import (
    ALL_FIELDS,
    DERIVED,
    KernelExperiment,
    attach,
    creation_time,
)
from kexp.core.problems import Problem, display_path, has_errors, sort_problems
from kexp.format.fileformat import FileFormatError, encode_like, parse, render_update, serialize
from kexp.format.legacykeys import without_stand_ins
from kexp.format.reading import read_file
from kexp.format.rules import id_from_name, slugify
from kexp.format.storechecks import check_store
from kexp.format.validate import CheckedFile, check_bytes
from kexp.storage import atomic
from kexp.storage.atomic import write_failure
from kexp.storage.layout import folder_parts
from kexp.storage.location import CACHE_DIR as CACHE_DIR
from kexp.storage.location import find_root as find_root
from kexp.storage.location import init_store as init_store
from kexp.storage.locking import exclusive_lock, file_lock
from kexp.storage.rows import LOCAL
from kexp.storage.sources import EXPERIMENTS_DIR

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from kexp.storage.refs import Elsewhere
    from kexp.storage.rows import Row

from kexp.storage.reader import StoreReader

_READ_ONLY_FIELDS = frozenset({"id"})
#: Derived values (as ``to_dict(include_derived=True)`` adds them): ignored on create.
_DERIVED_FIELDS = DERIVED
#: What a file holds besides the fields: unknown keys and sections, text before them.
_KEPT_CONTENT = frozenset({"extra_fields", "preamble", "extra_sections"})


class Store(StoreReader):
    """A store of experiments rooted at ``root`` (the folder holding ``experiments/``).

    ``source`` says where its files' bytes come from (:mod:`kexp.storage.sources`): by default
    the working tree's ``experiments/`` folder; :meth:`at` gives a store over a git
    revision; ``refs`` (patterns such as ``origin/*``) or ``all_refs`` read the working
    tree plus the store at those refs, one entry per experiment: its newest version
    (:mod:`kexp.storage.refs`; writes still go to the working tree). Whether the store may
    write, and whether queries may keep a cache file, are properties of its source.
    ``settings`` default to the store's own: its ``kexp.toml``
    (:func:`kexp.core.settings.load_settings`), else :data:`kexp.core.settings.DEFAULT_SETTINGS`.
    """

    def id_length_of(self, exp_id: str) -> int:
        """The length to print one id at, unique among the store's ids, without a read
        of the store: from the names of the files whose ids share its first
        :data:`~kexp.core.ids.SHOWN_LENGTH` characters (read across refs: among the
        last read's, as :meth:`shown_id_length`)."""
        if self.source.places is not None:
            return self.shown_id_length([exp_id])
        return ids.distinct_length([exp_id], self.id_index(exp_id[: ids.SHOWN_LENGTH]))

    # --- writing -------------------------------------------------------------------

    def create_experiment(
        self, exp: KernelExperiment | None = None, **fields: Any
    ) -> KernelExperiment:
        """Record a new experiment; returns it with ``id``, ``created_at`` and ``path`` set.

        ``exp`` is not changed (its ``id`` and ``created_at`` were made when it was built);
        an experiment whose id is in the store already (the same object created twice)
        raises :class:`ExperimentExistsError`, a :class:`ValueError`. An empty ``id`` or
        ``created_at`` is generated; a missing ``base_commit`` is
        taken from the code repository's ``HEAD`` (a given one is resolved to the full
        hash), a missing ``author`` as git takes a commit's (``GIT_AUTHOR_NAME``, else
        ``user.name``). When ``HEAD`` is taken while tracked kernel files have uncommitted
        changes, a warning says so and the tag
        ``uncommitted-base`` is added to ``tags``. The experiment is validated
        first: an invalid one raises :class:`ValidationError` and nothing is written.
        The file is created atomically and never overwrites another.
        """
        self._writable()
        unknown = sorted(set(fields) - set(ALL_FIELDS) - _KEPT_CONTENT - _DERIVED_FIELDS)
        if unknown:
            raise KexpError(
                f"cannot record {', '.join(unknown)}: not a field; "
                f"fields are {', '.join(ALL_FIELDS)}"
            )
        if exp is None:
            exp = KernelExperiment.from_dict(fields)
        elif set(fields) - _DERIVED_FIELDS:
            exp = dataclasses.replace(
                exp, **{k: v for k, v in fields.items() if k not in _DERIVED_FIELDS}
            )
        else:
            exp = dataclasses.replace(exp)
        explicit_id = bool(exp.id)
        # One look at the store's file names for the checks before the write (a walk
        # of every folder's listing), and one more under the locks, for the write: the
        # names of its id alone, unless it names others (their lineage is followed).
        names_others = bool(exp.pid or exp.combines)
        if explicit_id:
            ids.check_id(exp.id)
        only = exp.id if explicit_id and not names_others else ""
        named = self._id_finder(only) if explicit_id or names_others else None
        if explicit_id and named is not None and exp.id in named(exp.id):
            raise _exists(exp.id)
        # One reading of the clock for both: at a month's (or year's) last second the
        # id and created_at (hence the folder) name the same moment.
        now = ids.current_time()
        if not explicit_id:
            exp.id = ids.new_id(now)
        if not exp.created_at:
            exp.created_at = creation_time(now)
        self._expand_references(exp)
        self._fill_from_git(exp)
        text = serialize(exp)
        checked = check_bytes(text, self.path_for(exp), self.settings)
        problems = checked.problems + self._reference_problems(checked, named)
        named = None  # (the names are looked at again under the locks)
        if has_errors(problems):
            raise ValidationError(
                f"experiment {exp.id!r} was not recorded: it is invalid", sort_problems(problems)
            )
        with contextlib.ExitStack() as locked:
            if exp.samples:
                # The check that no experiment holds these timings already and the write
                # are one step: another process's record of the same ones (an agent's
                # retry, run twice at once) waits, then is refused.
                locked.enter_context(self._measurement_lock(exp.pid))
            if exp.code_change:
                from kexp.storage.repeats import warn_tried_before

                # Recorded all the same; the warning names the earlier experiments.
                warn_tried_before(
                    self,
                    exp.code_change,
                    exclude=[exp.id],
                    stacklevel=2,
                    base_commit=exp.base_commit,
                    env=exp.env,
                    samples=exp.samples,
                    record=exp,
                )
            if exp.samples:
                from kexp.storage.repeats import refuse_copy

                refuse_copy(self, exp)  # no code change, the same timings: a retry
            path = self.path_for(exp)
            _make_folder(path.parent)
            # The experiments it names may have been deleted meanwhile (a delete holds
            # the lineage lock exclusively), and another process may claim the same id
            # under another file name (it would hold the id's claim lock): check both
            # again, in one look at the names, and write while holding both locks.
            if names_others:
                locked.enter_context(self._lineage_lock(exclusive=False))
            if explicit_id:
                lock = self._claim_lock_path(exp.id)
                locked.enter_context(exclusive_lock(lock, self.settings.lock_timeout_s))
            named = self._id_finder(only) if names_others or explicit_id else None
            if names_others:
                problems = self._reference_problems(checked, named)
                if has_errors(problems):
                    raise ValidationError(
                        f"experiment {exp.id!r} was not recorded: it is invalid",
                        sort_problems(problems),
                    )
            if explicit_id and named is not None and exp.id in named(exp.id):
                raise _exists(exp.id)
            _write_new(path, text)
        self._written()
        return self._as_written(checked.experiment(), path)

    def _written(self) -> None:
        """After kexp wrote or deleted an experiment file: the answers kept for the files
        as they were are forgotten (:mod:`kexp.storage.answers`), so that the next
        question makes its rows while the files are ``stat``-ed instead of after."""
        if not self.source.cacheable:
            return
        from kexp.storage.cache import forget_answers
        from kexp.storage.cachefile import DamagedCacheError  # lazy: as the reader opens it

        with contextlib.suppress(DamagedCacheError, OSError):
            forget_answers(self.root / CACHE_DIR, self.settings)

    def _as_written(self, exp: KernelExperiment, path: Path) -> KernelExperiment:
        """``exp``, just written to ``path``, with what a query derives of it (its
        cumulative score, its outcome) derived when first asked for, from the experiments
        it depends on (:meth:`derived_of`): a write reads no other file unless its caller
        looks."""
        return attach(exp, self.settings, path=path, derived=lambda: self.derived_of(exp))

    def _expand_references(self, exp: KernelExperiment) -> None:
        """Expand id prefixes in ``pid`` and ``combines`` to full ids, as git does.

        Raises :class:`ExperimentNotFoundError` or :class:`AmbiguousIdError` for a prefix
        that names no experiment or several; full ids are left for validation.
        """
        shortest = self.settings.min_id_prefix
        if ids.is_prefix(exp.pid, shortest):
            exp.pid = self.resolve_id(exp.pid)
        if isinstance(exp.combines, list):
            exp.combines = [
                self.resolve_id(other) if ids.is_prefix(other, shortest) else other
                for other in exp.combines
            ]

    def path_for(self, exp: KernelExperiment) -> Path:
        """Where a create would write ``exp``: ``experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md``
        by its ``created_at`` (now, when that is no date) and the last two hex digits of
        its id (:mod:`kexp.storage.layout`); refuses a linked folder."""
        ids.check_id(exp.id)
        folder = self.experiments_dir
        for part in folder_parts(exp.id, exp.created_at, creation_time()):
            folder = folder / part
            if folder.is_symlink():
                raise KexpError(
                    f"{folder} is a symbolic link: kexp writes only inside {EXPERIMENTS_DIR}/; "
                    "replace the link with a folder"
                )
        return folder / f"{exp.id}-{slugify(exp.change_summary)}.md"

    def _fill_from_git(self, exp: KernelExperiment) -> None:
        """Fill ``base_commit``/``author`` from the code repository (see
        :func:`kexp.gitops.provenance.fill_from_git`: a dirty tree adds the tag
        ``uncommitted-base`` and warns)."""
        from kexp.gitops.provenance import fill_from_git

        fill_from_git(
            exp,
            self.code_repo,
            store_dir=self.experiments_dir,
            explicit=self.code_repo.resolve() != self.root,
            stacklevel=3,
        )

    def _reference_problems(
        self,
        checked: CheckedFile,
        named: Callable[[str], dict[str, list[Path]]] | None = None,
    ) -> list[Problem]:
        """The problems of ``pid`` and ``combines`` across the store: ids naming no
        experiment, and lineage cycles. Only the ids named are looked up (through
        ``named``, an id finder: a new one by default), and the pid chain read, so a
        write does not read the store."""
        if checked.document is None:
            return []
        fields = checked.document.fields
        if not fields.get("pid") and not fields.get("combines"):
            return []  # it names none
        index = _NamedIds(named or self._id_finder())
        own = checked.document.fields.get("id")
        if isinstance(own, str):
            index.add(own, checked.path)
        problems = [
            p
            for p in check_store([checked], index)
            if p.code in ("dangling-pid", "dangling-combines", "lineage-cycle")
        ]
        if isinstance(own, str) and not any(p.code == "lineage-cycle" for p in problems):
            problems += self._cycle_through_store(checked, own, index)
        return [self._on_refs(p, checked.document.fields) for p in problems]

    def _on_refs(self, problem: Problem, fields: Mapping[str, Any]) -> Problem:
        """``problem``, a ``pid`` or ``combines`` naming an experiment only some ref
        holds, with a hint saying which and the merge that brings it in."""
        named: Any = fields.get("pid") if problem.code == "dangling-pid" else None
        if problem.code == "dangling-combines":
            combines = fields.get("combines")
            position = int(problem.field.rpartition(".")[2])
            named = combines[position] if isinstance(combines, list) else None
        if not isinstance(named, str) or not ids.is_valid_id(named):
            return problem
        from kexp.storage.whereabouts import elsewhere

        found = elsewhere(self, named)
        if found is None:
            return problem
        return dataclasses.replace(problem, hint=f"it is {found}")

    def _cycle_through_store(
        self, checked: CheckedFile, own: str, index: Mapping[str, list[Path]]
    ) -> list[Problem]:
        """The lineage cycle this experiment's ``pid`` would close through stored files."""
        assert checked.document is not None
        chain = [own]
        current = checked.document.fields.get("pid")
        while isinstance(current, str) and current and current not in chain:
            chain.append(current)
            others = [p for p in index.get(current, []) if p != checked.path]
            if len(others) != 1:
                return []
            try:
                current = parse(read_file(others[0], self.settings), others[0]).fields.get("pid")
            except (OSError, FileFormatError):
                return []
        if current != own:
            return []
        line, column = checked.document.position(("pid",))
        loop = " -> ".join([*chain, own])
        return [
            Problem(
                str(checked.path),
                line,
                column,
                "error",
                "lineage-cycle",
                "pid",
                f"the pid chain loops back to this experiment: {loop}",
                "a parent must be an earlier experiment: fix one pid in the loop",
            )
        ]

    def update_experiment(self, exp_id: str, **changes: Any) -> KernelExperiment:
        """Change fields of an experiment; returns the updated experiment.

        Holds the experiment's lock, re-reads the file, validates the result and
        replaces the file atomically; only the lines of changed fields change (and a
        changed field's ``legacy_<field>``, the predecessor's value an import kept aside,
        is dropped: the field holds the truth now). An invalid result raises
        :class:`ValidationError` and leaves the file untouched.
        """
        self._writable()
        unknown = sorted(set(changes) - set(ALL_FIELDS))
        if unknown:
            raise KexpError(
                f"cannot update {', '.join(unknown)}: not a field; "
                f"fields are {', '.join(ALL_FIELDS)}"
            )
        if set(changes) & _READ_ONLY_FIELDS:
            raise KexpError("an experiment's id never changes; create a new experiment instead")
        full_id, path = self._find(exp_id, writing=True)
        with self.editing(full_id, names_others=bool({"pid", "combines"} & set(changes))):
            # A file over the size limit (written by hand, or by an older kexp) is read
            # up to max_repair_file_bytes, so that an update can make it small again.
            readable = dataclasses.replace(
                self.settings,
                max_file_bytes=max(
                    self.settings.max_file_bytes, self.settings.max_repair_file_bytes
                ),
            )
            try:
                data = read_file(path, readable)
            except FileNotFoundError:
                raise ExperimentNotFoundError(
                    f"experiment {full_id} was deleted meanwhile"
                ) from None
            except FileFormatError as exc:
                raise ValidationError(f"{path} cannot be read", [exc.problem]) from None
            checked = check_bytes(data, path, readable)
            if checked.document is None:
                raise ValidationError(
                    f"{path} cannot be read; fix it by hand first", checked.problems
                )
            old = checked.document.to_experiment()
            new = dataclasses.replace(old, **changes)
            # A corrected field holds the truth: the predecessor's value kept aside by
            # an import (legacy_<field>) goes, so that the export writes the new one.
            new.extra_fields = without_stand_ins(old.extra_fields, changes)
            if {"pid", "combines"} & set(changes):
                self._expand_references(new)
            # Written as the file was: its BOM and CRLF line endings kept.
            text = encode_like(data, render_update(checked.document, new))
            result = check_bytes(text, path, self.settings)
            problems = result.problems
            if {"pid", "combines"} & set(changes):
                problems = problems + self._reference_problems(result)
            if has_errors(problems):
                raise ValidationError(
                    f"experiment {full_id} was not updated: the result would be invalid",
                    sort_problems(problems),
                )
            if not _replace(path, text):
                raise ExperimentNotFoundError(
                    f"experiment {full_id} was moved or deleted meanwhile (kexp "
                    "migrate-layout?): nothing was written; run the update again"
                )
        self._written()
        return self._as_written(result.experiment(), path)

    def delete_experiment(self, exp_id: str, *, force: bool = False) -> Path:
        """Delete an experiment's file; returns its path.

        Refused while other experiments name it as their ``pid`` (their lineage would
        break) or in their ``combines`` unless ``force=True``.
        """
        self._writable()
        full_id, path = self._find(exp_id, writing=True, removing=True)
        # Exclusive: no write naming this experiment is between its check and its write.
        with self._lineage_lock(exclusive=True):
            deleted = self._delete(full_id, path, force)
        self._note_removed(deleted)
        return deleted

    def _note_removed(self, path: Path) -> None:
        """After a file of the working tree was removed (deleted, or renamed by
        :meth:`re_id`): a side branch it was published to loses it at its sync."""
        if not self.is_working_tree:
            return
        from kexp.gitops import git as kgit
        from kexp.storage.published import note_removal

        repo = kgit.find_repo(self.root)
        if repo is not None:
            with contextlib.suppress(KexpError, OSError, ValueError):
                top = kgit.toplevel(repo)
                note_removal(repo, path.resolve().relative_to(top).as_posix())

    def remove_experiment(
        self,
        exp_id: str,
        *,
        force: bool = False,
        confirm: Callable[[Removal], bool] | None = None,
    ) -> Removal:
        """``kexp rm`` in one call: delete an experiment's file after the checks and the
        question the command makes, and say what happened (:class:`Removal`).

        The experiment (id or unique prefix) must be in the working tree (one a ref holds,
        or removed here already, is an error saying so). Unless ``force``, while other
        experiments name it as their ``pid`` or in their ``combines`` nothing is deleted
        and ``refused`` says why, before ``confirm`` is asked; ``confirm``, when given, is
        asked with the removal to be made (its ``summary`` read) and nothing is deleted
        unless it answers True. A child recorded between the check and the delete refuses
        it too (:meth:`delete_experiment`'s error, in ``refused``)."""
        path = self.path_of(exp_id, writing=True, removing=True)
        full_id = self.resolve_id(exp_id)
        removal = Removal(full_id, path)
        if not force:  # refused before asking: the answer would not matter
            kids, combiners = self.dependents(full_id)
            if kids or combiners:
                what = (
                    f"the parent of {_id_list(kids)}"
                    if kids
                    else f"combined by {_id_list(combiners)}"
                )
                why = f"{full_id} is {what}: deleting it would leave them pointing nowhere"
                return dataclasses.replace(removal, refused=why)
        if confirm is not None:
            try:
                summary: str | None = self.get_experiment(full_id).change_summary
            except Exception:  # an invalid file is deleted like any other
                summary = None
            if not confirm(dataclasses.replace(removal, summary=summary)):
                return dataclasses.replace(removal, summary=summary)
        try:
            deleted = self.delete_experiment(full_id, force=force)
        except DeleteRefusedError as exc:  # a child recorded since the check above
            return dataclasses.replace(removal, refused=str(exc))
        return dataclasses.replace(removal, path=deleted, deleted=True)

    def _delete(self, full_id: str, path: Path, force: bool) -> Path:
        if not force:
            kids, combiners = self.dependents(full_id)
            if kids:
                raise DeleteRefusedError(
                    f"experiment {full_id} is the parent of {', '.join(kids)} (their pid): "
                    "deleting it would break their lineage; nothing was deleted. Set their "
                    "pid to another experiment's id, or to '' (kexp update ID --set pid=), "
                    "first, or force the delete"
                )
            if combiners:
                raise DeleteRefusedError(
                    f"experiment {full_id} is combined by {', '.join(combiners)}: deleting "
                    "it would leave their 'combines' pointing nowhere; nothing was deleted. "
                    "Remove it from their combines first, or force the delete"
                )
        with exclusive_lock(self._lock_path(full_id), self.settings.lock_timeout_s):
            try:
                path.unlink()
            except FileNotFoundError:
                raise ExperimentNotFoundError(
                    f"experiment {full_id} was deleted meanwhile"
                ) from None
        self._written()
        return path

    def re_id(self, path: Path | str, *, force: bool = False) -> ReId:
        """``kexp re-id PATH``: give the experiment file at ``path`` (in the working tree's
        ``experiments/``; a relative path from the working directory) a fresh id
        (:func:`kexp.core.ids.new_id`) and the name that goes with it,
        ``experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md`` by the new id's time, as a create
        names a file. Only the ``id`` line changes (``created_at`` too is kept: what the
        experiment says of itself). For a copied file, or two branches that made one id.

        Refused (:class:`KexpError`, nothing changed) for a file that is not an
        experiment's, or whose front-matter cannot be read or names another id than its
        name; and, unless ``force``, while other experiments build on it (name it as their
        ``pid`` or in their ``combines``): the id being the file's alone (they would point
        nowhere), or being this file's alone where they are (another file holds it
        elsewhere: they would name that one's experiment). Read across refs too
        (:func:`kexp.storage.refs.id_elsewhere`): another branch's experiment made with
        the same id shares it; one building on it there names it. The new file is in
        place before the old name goes: a crash between leaves both, never neither."""
        self._writable()
        file = self._experiment_file(Path(path))
        old_id = id_from_name(file)
        assert old_id is not None  # (checked)
        with contextlib.ExitStack() as locked:
            # Exclusive: no write naming the old id between the check and the move.
            locked.enter_context(self._lineage_lock(exclusive=True))
            locked.enter_context(self.lock(old_id))
            if not force:
                # lazy: a read across refs, for this question alone
                from kexp.storage.refs import id_elsewhere

                relative = file.relative_to(self.experiments_dir.resolve()).as_posix()
                elsewhere = id_elsewhere(self, old_id, relative)
                copies = [p for p in self.id_index(old_id).get(old_id, []) if p.resolve() != file]
                alone = not copies and not elsewhere.others
                refusal = _lineage_refusal(
                    file, old_id, copies, elsewhere, self.dependents(old_id) if alone else None
                )
                if refusal:
                    raise KexpError(refusal)
            data, checked = self._readable(file)
            assert checked.document is not None  # (checked)
            now = ids.current_time()
            new = dataclasses.replace(checked.document.to_experiment(), id=ids.new_id(now))
            text = encode_like(data, render_update(checked.document, new))
            target = self.path_for(dataclasses.replace(new, created_at=creation_time(now)))
            locked.enter_context(
                exclusive_lock(self._claim_lock_path(new.id), self.settings.lock_timeout_s)
            )
            _make_folder(target.parent)
            _write_new(target, text)
            try:
                file.unlink()
            except OSError as exc:
                target.unlink(missing_ok=True)
                raise write_failure(file, exc) from None
        self._note_removed(file)
        self._written()
        return ReId(old_id, file, new.id, target)

    def _experiment_file(self, path: Path) -> Path:
        """``path`` (relative: to the working directory) as an experiment file of the
        working tree, its folders resolved; else a one-line :class:`KexpError`."""
        absolute = path if path.is_absolute() else Path.cwd() / path
        try:
            file = absolute.parent.resolve() / absolute.name
        except OSError as exc:
            raise KexpError(f"{path} cannot be read: {exc.strerror or exc}") from None
        if not file.is_relative_to(self.experiments_dir.resolve()):
            raise KexpError(
                f"{path} is not in this store's {EXPERIMENTS_DIR}/ ({self.experiments_dir}): "
                "give the path of one of its experiment files"
            )
        if id_from_name(file) is None:
            raise KexpError(f"{path} is not an experiment file: its name is not <id>-<slug>.md")
        if file.is_symlink() or not file.is_file():
            raise KexpError(f"{path} is not an experiment file: no such file")
        return file

    def _readable(self, file: Path) -> tuple[bytes, CheckedFile]:
        """The bytes of experiment ``file`` and their check, when its front-matter is read
        and holds the id its name does; else a one-line :class:`KexpError`."""
        try:
            data = read_file(file, self.settings)
        except FileFormatError as exc:
            raise KexpError(f"{file} cannot be read: {exc.problem.message}") from None
        except OSError as exc:
            raise KexpError(f"{file} cannot be read: {exc.strerror or exc}") from None
        checked = check_bytes(data, file, self.settings)
        if checked.document is None or checked.document.fields.get("id") != id_from_name(file):
            raise KexpError(
                f"{file} has no front-matter holding the id its name does: fix it by hand "
                f"first (kexp validate {shlex.quote(str(file))} says what is wrong)"
            )
        return data, checked

    def dependents(self, exp_id: str) -> tuple[list[str], list[str]]:
        """The ids of the valid experiments whose ``pid`` is this experiment (id or
        unique prefix), and of those whose ``combines`` hold it (in path order): what
        makes :meth:`delete_experiment` refuse. From a full refresh of the cache, as a
        query reads: a ``pid`` set in an editor that saves in place is seen too (a
        delete is rare and cannot be undone; the ``stat`` of every file is its price)."""
        full_id = exp_id if ids.is_valid_id(exp_id) else self.resolve_id(exp_id)
        if not self.source.cacheable or self.source.places is not None:
            rows = self.found().local
            return (
                [row.id for row in rows if row.pid == full_id],
                [row.id for row in rows if full_id in row.combines],
            )
        from kexp.storage.cache import Cache, rebuilt_on_doubt
        from kexp.storage.listing import refresh

        def naming(cache: Cache) -> list[Row]:
            listing = refresh(cache, self.experiments_dir, self.settings, rows=False)
            return listing.rows_naming(full_id)

        cache = self.open_cache()
        try:
            cache, rows = rebuilt_on_doubt(cache, naming)
        finally:
            cache.close()
        return (
            [row.id for row in rows if row.pid == full_id],
            [row.id for row in rows if full_id in row.combines],
        )

    def lineage_lock(self, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        """Hold the store's lineage lock: exclusive, no delete and no write naming other
        experiments runs meanwhile (:func:`kexp.storage.migration.migrate_layout` holds it)."""
        return self._lineage_lock(exclusive=exclusive)

    def _lineage_lock(self, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        """The store's lineage lock (see :mod:`kexp.storage.locking`): shared by writes that name
        other experiments, exclusive for deletes."""
        path = self.cache_dir / "locks" / "lineage.lock"
        return file_lock(path, self.settings.lock_timeout_s, shared=not exclusive)

    def _measurement_lock(self, pid: str) -> contextlib.AbstractContextManager[None]:
        """The lock a create of timings holds from its check that no experiment holds
        them already until its file is written (see :mod:`kexp.storage.locking`): one of
        257, by the parent's id (a copy has the same parent), the roots' one of their own."""
        name = pid[-2:] if ids.is_valid_id(pid) else "root"
        return exclusive_lock(
            self.cache_dir / "locks" / f"measure-{name}.lock", self.settings.lock_timeout_s
        )

    def _lock_path(self, exp_id: str) -> Path:
        return self.cache_dir / "locks" / f"{ids.check_id(exp_id)}.lock"

    def _claim_lock_path(self, exp_id: str) -> Path:
        """The lock a create holds to claim an id: one of 256, by the id's last two
        (random) characters. Every experiment object has its id from construction, so
        every create claims one: a lock file per id would leave one per experiment."""
        return self.cache_dir / "locks" / f"claim-{ids.check_id(exp_id)[-2:]}.lock"

    def lock(self, exp_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the write lock of one experiment (a full id), as updates and deletes do."""
        return exclusive_lock(self._lock_path(exp_id), self.settings.lock_timeout_s)

    @contextlib.contextmanager
    def editing(self, exp_id: str, *, names_others: bool = False) -> Iterator[str]:
        """Hold the locks of an update of one experiment (id or prefix; the lineage lock,
        shared, first when it ``names_others``) for the ``with`` block, which gets the
        full id: a read-modify-write that reads the file inside it writes over no other
        write (the update it ends with takes the same locks again, re-entrant)."""
        full_id = self._find(exp_id, writing=True)[0]
        with (
            self._lineage_lock(exclusive=False) if names_others else contextlib.nullcontext(),
            self.lock(full_id),
            self.holding(full_id),
        ):
            yield full_id


class _NamedIds(Mapping[str, list[Path]]):
    """Ids → their files, looked up one id at a time (a write names a few) through an
    id finder (:meth:`Store._id_finder`), for :func:`kexp.format.storechecks.check_store`."""

    def __init__(self, finder: Callable[[str], dict[str, list[Path]]]) -> None:
        self._finder = finder
        self._known: dict[str, list[Path]] = {}

    def add(self, exp_id: str, path: Path) -> None:
        """Count ``path`` as a file of ``exp_id`` too (the one being written)."""
        paths = self.get(exp_id, [])
        self._known[exp_id] = sorted({*paths, path})

    def __getitem__(self, exp_id: str) -> list[Path]:
        if exp_id not in self._known:
            found = self._finder(exp_id).get(exp_id, []) if ids.is_valid_id(exp_id) else []
            self._known[exp_id] = found
        paths = self._known[exp_id]
        if not paths:
            raise KeyError(exp_id)
        return paths

    def __iter__(self) -> Iterator[str]:
        """The ids looked up so far that have files (not every id of the store)."""
        return iter([key for key, paths in self._known.items() if paths])

    def __len__(self) -> int:
        return sum(1 for paths in self._known.values() if paths)


@dataclasses.dataclass(frozen=True)
class Removal:
    """What :meth:`Store.remove_experiment` (``kexp rm``) did: the experiment, its file,
    and whether the file was deleted, else why not (``refused``; neither: the question
    was answered no)."""

    #: The experiment's full id.
    id: str
    #: Its file (deleted when ``deleted``).
    path: Path
    #: Whether the file was deleted.
    deleted: bool = False
    #: Why nothing was deleted: other experiments name it as their parent or combine it
    #: ("" when it was not refused).
    refused: str = ""
    #: Its change_summary, read for the question (None: its file is invalid; "" when
    #: no question was asked).
    summary: str | None = ""


@dataclasses.dataclass(frozen=True)
class ReId:
    """What :meth:`Store.re_id` (``kexp re-id``) did: the experiment file's id and path
    before, and after."""

    #: The id the file held (another file may still hold it).
    old_id: str
    #: Where the file was (gone now).
    old_path: Path
    #: Its new id.
    id: str
    #: Its new file.
    path: Path


def _lineage_refusal(
    file: Path,
    old_id: str,
    copies: list[Path],
    elsewhere: Elsewhere,
    dependents: tuple[list[str], list[str]] | None,
) -> str | None:
    """Why a new id for ``file`` (holding ``old_id``) would break the lineage of the
    experiments building on it, or None. ``copies``: the working tree's other files of
    the id; ``dependents``: the working tree's children and combiners, when the id is the
    file's alone (else only those where the id is this file's alone count)."""
    only = elsewhere.only_this
    naming = [
        r
        for r in elsewhere.naming
        if dependents is not None or (r.where and only & {*r.where.refs})
    ]
    kids, combiners = dependents or ([], [])
    kids = [*kids, *(r.id for r in naming if r.pid == old_id and r.id not in kids)]
    combiners = [
        *combiners, *(r.id for r in naming if old_id in r.combines and r.id not in combiners)
    ]  # fmt: skip
    if not kids and not combiners:
        return None
    what = f"the parent of {_id_list(kids)}" if kids else f"combined by {_id_list(combiners)}"
    refs = sorted({p for r in naming if r.where for p in r.where.refs} - {LOCAL})
    on = f" (read across refs: on {', '.join(refs)})" if refs else ""
    force = RE_ID_FORCE.say(path=shlex.quote(display_path(file)))
    if dependents is not None:
        return (
            f"{file} holds the only copy of {old_id}, {what}{on}: a new id would break their "
            "lineage; nothing was changed (kexp re-id is for one of two files that share an "
            f"id, here or on another branch; to leave them naming no experiment, {force})"
        )
    other = (
        RE_ID.say(path=shlex.quote(display_path(copies[0])))
        if copies
        else f"on {', '.join(elsewhere.others)}, by whoever made it"
    )
    return (
        f"{file} holds the {old_id} that is {what}{on}, where no other file holds that "
        "id: a new id would give their lineage the other file's experiment; nothing was "
        f"changed: give the other file a fresh id instead ({other}), or, to go ahead all "
        f"the same, {force}"
    )


def _id_list(exp_ids: list[str], shown: int = 5) -> str:
    """``2 experiment(s) (6749f3a0c2, 6749e1b2a0)``: a count and the first ids, short."""
    more = f" and {len(exp_ids) - shown} more" if len(exp_ids) > shown else ""
    return f"{len(exp_ids)} experiment(s) ({', '.join(i[:10] for i in exp_ids[:shown])}{more})"


def _exists(exp_id: str) -> ExperimentExistsError:
    return ExperimentExistsError(
        f"an experiment with id {exp_id} already exists (was this experiment created "
        "already?): nothing was written; to record another, build a new KernelExperiment "
        "(it gets a fresh id) or leave its id empty"
    )


def _make_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) for a new file, or say why it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failure(folder, exc) from None


def _write_new(path: Path, text: str | bytes) -> None:
    """Create ``path`` with ``text`` atomically (:func:`kexp.storage.atomic.create`); fails if
    the name is taken."""
    try:
        atomic.create(path, text)
    except FileExistsError:
        raise atomic.exists_error(path) from None
    except OSError as exc:
        raise write_failure(path, exc) from None


def prepare_new_files(files: Sequence[tuple[Path, str]]) -> list[Path]:
    """The first half of :func:`_write_new` for many files at once
    (:func:`kexp.storage.atomic.prepare`: one sync of their file system for all);
    :func:`link_new_file` puts each in place."""
    try:
        return atomic.prepare(files)
    except OSError as exc:
        raise write_failure(files[0][0] if files else Path(), exc) from None


def link_new_file(temporary: Path, path: Path) -> None:
    """Put a file of :func:`prepare_new_files` in place atomically if ``path`` is free
    (else :class:`KexpError`: nothing is overwritten); the temporary name goes."""
    try:
        atomic.link(temporary, path)
    except FileExistsError:
        raise atomic.exists_error(path) from None
    except OSError as exc:
        raise write_failure(path, exc) from None


def _replace(path: Path, text: str | bytes) -> bool:
    """Replace ``path`` with ``text`` atomically, keeping its mode
    (:func:`kexp.storage.atomic.replace`); a file gone meanwhile is not brought back (False)."""
    try:
        return atomic.replace(path, text, only_if_exists=True)
    except OSError as exc:
        raise write_failure(path, exc) from None
