"""The store's reading half: :class:`StoreReader`, which :class:`kexp.storage.store.Store`
extends with its writes. Its role: the one read of the store's files and the queries
over it.

A store reads its files through a source (:mod:`kexp.storage.sources`: the working tree, a git
revision for :meth:`StoreReader.at`, the working tree and refs for
``Store(root, refs=...)``), queries them through one pipeline (the rows of every
current experiment from the cache, :mod:`kexp.storage.cache`; the derived values over all of
them, :func:`kexp.core.campaign.derive`; filters; :func:`kexp.storage.query.rank`; only the chosen
files read whole), and validates them in one scan (:mod:`kexp.storage.validation`). Reads
never see a half-written file (every write is a rename of a finished temporary file).

What it asks of others, each a module of its own: the experiments made of the rows a
query chose (:mod:`kexp.storage.fromrows`), which experiment an id names
(:mod:`kexp.storage.idlookup`, on :mod:`kexp.storage.idindex`), what is derived of one
experiment from its lineage alone (:mod:`kexp.storage.derivedof`), the answers kept for
an unchanged store (:mod:`kexp.storage.answers`), history (:mod:`kexp.storage.history`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kexp.core import ids
from kexp.core.campaign import Derivation
from kexp.core.collector import collector_paused
from kexp.core.cumulative import Derived
from kexp.core.errors import (
    CacheFolderError,
    DuplicateIdWarning,
    ExperimentNotFoundError,
    InvalidExperimentWarning,
    KexpError,
    NoMatchWarning,
    StoreNotFoundError,
    ValidationError,
)
from kexp.core.model import KernelExperiment, attach
from kexp.core.problems import Problem
from kexp.core.settings import Settings, load_settings
from kexp.format.rules import id_from_name
from kexp.format.validate import CheckedFile
from kexp.storage.answers import (
    Answer,
    Waiting,
    Whole,
    answer_name,
    held_answer,
    held_whole,
    keep_answer,
    keep_whole,
    waiting_answer,
)
from kexp.storage.bodies import read_bodies
from kexp.storage.controls import control_rows
from kexp.storage.derivedof import derived_from_lineage
from kexp.storage.fromrows import brief_experiments, skip_invalid, whole_experiments
from kexp.storage.idindex import held_twice, id_finder
from kexp.storage.idlookup import find_file, id_among, resolve_references
from kexp.storage.location import CACHE_DIR as CACHE_DIR
from kexp.storage.location import find_root as find_root
from kexp.storage.location import init_store as init_store
from kexp.storage.location import refuse_linked_store, refuse_links_in_cache
from kexp.storage.movedtwins import used_twice
from kexp.storage.operators import part_of, unmatched_operator, unmatched_value
from kexp.storage.query import (
    RANKINGS,
    Filters,
    build_filters,
    chronological,
    matches,
    rank,
    ranking_leaves_out,
    select,
)
from kexp.storage.rows import Row, problem_at
from kexp.storage.sources import EXPERIMENTS_DIR, FileSource, Found, WorkingTree
from kexp.storage.validation import validate_store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from kexp.storage.cache import Cache
    from kexp.storage.history import Changes, HistoryEntry
    from kexp.storage.listing import Listing

_S = TypeVar("_S", bound="StoreReader")
_Held = TypeVar("_Held", Answer, Whole)


class _Selected(NamedTuple):
    """What the one pipeline's first steps found (:meth:`Store._rows`)."""

    #: The rows passing every filter but ``text``, in path order.
    rows: list[Row]
    #: The ``text`` filter, left for the experiments read whole (None: none).
    text: Filters | None
    #: What is derived of every current experiment (:func:`kexp.core.campaign.derive`).
    derivation: Derivation


class StoreReader:
    """What a :class:`~kexp.storage.store.Store` reads: its files, queries, lineage, history and
    validation (see :class:`~kexp.storage.store.Store` for the arguments)."""

    def __init__(
        self,
        root: Path | str | None = None,
        *,
        code_repo: Path | str | None = None,
        settings: Settings | None = None,
        source: FileSource | None = None,
        refs: Sequence[str] = (),
        all_refs: bool = False,
    ) -> None:
        self.root = Path(root).resolve() if root is not None else find_root()
        if source is None:
            refuse_linked_store(self.root / EXPERIMENTS_DIR)
            if not (self.root / EXPERIMENTS_DIR).is_dir():
                raise StoreNotFoundError(
                    f"{self.root} has no {EXPERIMENTS_DIR}/ folder: create the store with "
                    f"'kexp init {self.root}'"
                )
            source = WorkingTree(self.root / EXPERIMENTS_DIR)
        # The store's own settings (its kexp.toml) unless given.
        self.settings = settings if settings is not None else load_settings(self.root)
        if isinstance(refs, str):
            refs = [refs]
        if refs or all_refs:
            if source.revision is not None or not source.writable:
                raise KexpError(
                    "reading across refs starts from the working tree: give a revision or "
                    "refs, not both"
                )
            from kexp.storage.refs import RefsSource

            assert isinstance(source, WorkingTree)
            source = RefsSource(source, self.root, refs, all_refs=all_refs, settings=self.settings)
        env_repo = os.environ.get("KEXP_CODE_REPO")
        self.code_repo = Path(code_repo or env_repo or self.root)
        self.source: FileSource = source
        self._ids_read: Callable[[], list[str]] = list  # (those of the last read)
        #: The files of the experiments whose write lock this store holds, each found
        #: once under the lock (:meth:`holding`).
        self._held_files: dict[str, Path] = {}

    def __repr__(self) -> str:
        revision, commit = self.source.revision, self.source.commit
        if revision is not None:  # the commit it named when the store was made, read since
            pinned = f"  # commit {commit[:12]}" if commit and commit != revision else ""
            return f"Store({str(self.root)!r}).at({revision!r}){pinned}"
        if self.source.places is not None:
            return f"Store({str(self.root)!r}, refs={list(self.source.places[1:])!r})"
        return f"Store({str(self.root)!r})"

    @property
    def revision(self) -> str | None:
        """The revision this store reads, as given to :meth:`at` (None: the working tree)."""
        return self.source.revision

    @property
    def commit(self) -> str | None:
        """The full hash of :attr:`revision` (None: the working tree)."""
        return self.source.commit

    def _writable(self) -> None:
        """Refuse a write to a store whose source is read-only (a revision)."""
        if not self.source.writable:
            raise self.source.read_only()

    @property
    def experiments_dir(self) -> Path:
        """The ``experiments/`` folder."""
        return self.root / EXPERIMENTS_DIR

    @property
    def cache_dir(self) -> Path:
        """The store's git-ignored cache folder (created on first use); refused for a
        store at a revision, which writes nothing, not even its cache."""
        self._writable()
        folder = self.root / CACHE_DIR
        refuse_links_in_cache(folder)  # links committed by someone: never written through
        if not folder.is_dir():
            try:
                folder.mkdir(exist_ok=True)
                with contextlib.suppress(FileExistsError), (folder / ".gitignore").open("x") as f:
                    f.write("# kexp's cache: never committed\n*\n")
            except OSError as exc:
                raise CacheFolderError(
                    f"cannot create kexp's cache folder {folder}: {exc.strerror or exc}; "
                    f"kexp keeps its locks there to write to the store (check the owner and "
                    f"permissions of {self.root}); reading needs no write"
                ) from None
        return folder

    # --- reading -----------------------------------------------------------------

    def paths(self) -> list[Path]:
        """Every experiment file (``<id>-<slug>.md`` under ``experiments/``), sorted; hidden
        files and folders (writers' temporary files) and links to folders are not followed."""
        return self.source.paths()

    def check_files(self, paths: list[Path] | None = None) -> list[CheckedFile]:
        """Read and check files (all experiment files by default)."""
        return self.source.check_files(paths or self.paths(), self.settings)

    def contents(self, paths: Sequence[str]) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``paths`` in order, with its bytes or the problem that says why it
        cannot be read (as :meth:`check_files` reports it); at a revision, one ``git
        cat-file --batch`` process streams them. Memory does not grow with the files."""
        return self.source.contents(paths, self.settings)

    def check_file(self, path: Path | str) -> CheckedFile:
        """Read and check one experiment file."""
        return self.source.check(Path(path), self.settings)

    @property
    def is_working_tree(self) -> bool:
        """Whether this store reads the files of ``experiments/`` on disk (not a
        revision's files)."""
        return self.source.writable

    def open_cache(self) -> Cache:
        """The store's cache (:mod:`kexp.storage.cache`), opened for one query (the caller closes
        it): its file in ``.kexp/``; in memory for a store that keeps none (at a
        revision, or ``cacheable=False``), or where ``.kexp/`` cannot be made (a store
        one may read but not write)."""
        from kexp.storage.cache import Cache

        if not self.source.cacheable:
            return Cache(None, self.settings)
        try:
            folder: Path | None = self.cache_dir
        except OSError:
            folder = None
        return Cache(folder, self.settings)

    def found(self, *, strict: bool = False) -> Found:
        """Every experiment file a query sees now, through the cache (see
        :meth:`kexp.storage.sources.FileSource.read`): the rows of the valid ones, in path
        order; invalid files are warned about (``strict``: raised). The one read every
        query starts from."""
        found, _ = self._read(None, held_answer)
        for path, error in found.invalid:
            skip_invalid(self, path, error, strict)
        return found

    def _read(
        self,
        question: Sequence[Any] | None,
        hold: Callable[[Waiting, Listing], _Held | None],
    ) -> tuple[Found, _Held | None]:
        """:meth:`found`, invalid files not warned about; with a ``question``, also the
        answer the cache keeps for it of an unchanged working tree, if it holds (``hold``:
        :func:`~kexp.storage.answers.held_answer` for a ranking's, else
        :func:`~kexp.storage.answers.held_whole`; then no row is made but the answer's)."""
        from kexp.storage.cache import rebuilt_on_doubt

        places = self.source.answer_places() if question else None
        twice: list[str | None] = [None]  # the ids several files hold, said (held_twice)

        def read(cache: Cache) -> tuple[Found, _Held | None]:
            waiting = None if places is None else waiting_answer(cache, question or (), places)
            found = self.source.read(cache, self.settings, rows=waiting is None)
            if found.listing is not None:
                twice[0] = held_twice(found.listing, self.experiments_dir, cache)
            if waiting is None or found.listing is None:
                return found, None
            held = hold(waiting, found.listing)
            if held is None:
                return self.source.completed(cache, self.settings, found), None
            return found, held

        cache = self.open_cache()
        try:
            with collector_paused():  # a read makes a few objects a file and frees none
                cache, (found, held) = rebuilt_on_doubt(cache, read)
        finally:
            cache.close()
        if twice[0] is not None:
            warnings.warn(twice[0], DuplicateIdWarning, stacklevel=4)
        if held is not None and held.ids is not None:  # no row made: the ids its read saw
            self._ids_read = held.ids
        else:
            every = found.ids()
            self._ids_read = lambda: every
        return found, held

    def answered(self, question: Sequence[Any], make: Callable[[Found], Any]) -> Any:
        """``make(found)`` of a read now, or the value it made for ``question`` when
        nobody has changed the files since (the read's one fast path:
        :mod:`kexp.storage.answers`); invalid files are warned about either way.
        ``make``'s value is plain data (:mod:`marshal` keeps it) decided by the files
        read and ``question`` alone."""
        found, held = self._read(question, held_whole)
        for path, error in held.invalid if held is not None else found.invalid:
            skip_invalid(self, path, error, False)
        if held is not None:
            return held.value
        value = make(found)
        if (name := answer_name(found, question)) is not None:
            cache = self.open_cache()
            try:
                keep_whole(cache, name, value, found)
            finally:
                cache.close()
        return value

    def shown_id_length(self, shown: Iterable[str]) -> int:
        """The length to print the ids of ``shown`` at: each unique among the last read's."""
        return ids.distinct_length(shown, self._ids_read())

    def derivation(self, *, strict: bool = False) -> Derivation:
        """What is derived of every current experiment from all of them (outcome,
        interference, cumulative score and its interval, control): see
        :func:`kexp.core.campaign.derive`. ``of(record)`` answers for any record listed."""
        return self.found(strict=strict).derivation(self.settings)

    # --- queries: the one pipeline ------------------------------------------------

    def _rows(self, filters: dict[str, Any], *, strict: bool,
              skips: tuple[bool, bool, bool] = (False, False, False),
              found: Found | None = None) -> _Selected:  # fmt: skip
        """The one pipeline's first steps: every current row (:meth:`found`, unless
        given), what is derived of them all (:func:`kexp.core.campaign.derive`), and those
        passing every filter but ``text`` (returned; ``skips``: leave out the buggy,
        pending, controls)."""
        skip_buggy, skip_pending, skip_controls = skips
        filters = dict(filters)
        reachable_from = filters.pop("reachable_from", None)
        text = filters.pop("text", None)
        with collector_paused():  # many objects made, none in a cycle
            found = self.found(strict=strict) if found is None else found
            wanted = build_filters(**self._resolve_filter_ids(filters, found))
            derivation = found.derivation(self.settings)
            rows = select(found.rows, wanted, self.settings, derivation=derivation,
                          skip_buggy=skip_buggy, skip_pending=skip_pending,
                          skip_controls=skip_controls)  # fmt: skip
        if reachable_from is not None:
            from kexp.gitops.provenance import reachable

            rows = reachable(rows, self.code_repo, str(reachable_from))
        return _Selected(rows, build_filters(text=text) if text is not None else None, derivation)

    def list_experiments(
        self, *, strict: bool = False, brief: bool = False, **filters: Any
    ) -> list[KernelExperiment]:
        """Every valid experiment matching ``filters``, oldest first.

        Invalid files are skipped with an :class:`InvalidExperimentWarning` naming the
        file and its first problem; ``strict=True`` raises :class:`ValidationError`.
        ``brief=True`` leaves the body fields empty (they are not read): faster, for
        listings that show front-matter only.

        Git-aware filters (resolved in the code repository): ``reachable_from=REV``
        keeps experiments whose ``base_commit`` is an ancestor of ``REV``;
        ``base_commit`` takes a hash prefix or any revision (``main``, ``HEAD~2``).
        """
        selected = self._rows(filters, strict=strict)
        chosen = chronological(selected.rows)
        derivation = selected.derivation
        if selected.text is not None:
            complete = whole_experiments(self, chosen, derivation.of, strict=strict)
            listed = [e for e in complete if matches(e, selected.text, self.settings)]
        elif brief:
            listed = brief_experiments(self, chosen, derivation.of)
        else:
            listed = whole_experiments(self, chosen, derivation.of, strict=strict)
        if not listed:
            self.note_unmatched(filters)
        return listed

    def with_bodies(self, experiments: Iterable[KernelExperiment]) -> Iterator[KernelExperiment]:
        """The experiments given (as ``list_experiments(brief=True)`` returns them) with
        their body fields read from their files, a few at a time: memory stays flat
        however many there are.

        The front-matter is the one given (validated when it was listed); the bodies come
        from the file as it is now (found on a ref: its content). A file that can no
        longer be read, or that holds another experiment, gives its experiment back
        without bodies, with an :class:`InvalidExperimentWarning`.
        """
        pending = iter(experiments)
        while batch := list(itertools.islice(pending, 256)):
            yield from read_bodies(batch, self.source, self.settings, self.experiments_dir)

    def top_experiments(
        self,
        max_results: int | None = None,
        *,
        include_buggy: bool = False,
        include_pending: bool = False,
        include_controls: bool = False,
        strict: bool = False,
        brief: bool = False,
        by: str = "cumulative",
        **filters: Any,
    ) -> list[KernelExperiment]:
        """The best experiments (:func:`kexp.storage.query.rank`), at most ``max_results`` (20).

        ``by="cumulative"`` (the default) ranks by the cumulative score, the speedup over
        the operator's reference (the best *tips* of a campaign first; experiments whose
        cumulative score cannot be known follow, by score: see
        :attr:`KernelExperiment.cumulative_reason`); ``by="low"`` by the low end of its
        95 % interval; ``by="score"`` by the score itself (one step, for an experiment
        measured against its parent). Buggy ones and failed runs (nothing measured),
        pending ones (status new/running), are left out unless asked for, by ``include_buggy``/
        ``include_pending`` or by an explicit ``is_buggy``, ``status`` or ``outcome``
        filter; controls (tag ``control``, A/A runs) are never ranked, unless
        ``include_controls`` or a ``tags`` filter names ``control``. Only the
        experiments returned are read whole (none with ``brief``).
        """
        if by not in RANKINGS:
            raise KexpError(f"cannot rank by {by!r}; use one of {', '.join(RANKINGS)}")
        limit = max(0, self.settings.top_default if max_results is None else max_results)
        skip_buggy, skip_pending = ranking_leaves_out(
            filters, include_buggy=include_buggy, include_pending=include_pending
        )
        named = (*_as_list(filters.get("tags")), *_as_list(filters.get("outcome")))
        skip_controls = not include_controls and "control" not in named
        skips = (skip_buggy, skip_pending, skip_controls)
        if filters.get("text") is None:
            best, of = self._best(filters, skips, strict=strict, by=by, limit=limit)
            if not best:
                self.note_unmatched(filters)
            return (
                brief_experiments(self, best, of)
                if brief
                else whole_experiments(self, best, of, strict=strict)
            )
        rows, text, derivation = self._rows(filters, strict=strict, skips=skips)
        assert text is not None
        ranked = rank(rows, by=by, derivation=derivation)
        chosen: list[KernelExperiment] = []
        step = max(limit, 1) * 4
        for start in range(0, len(ranked), step):
            if len(chosen) >= limit:
                break
            batch = whole_experiments(
                self, ranked[start : start + step], derivation.of, strict=strict
            )
            chosen += [e for e in batch if matches(e, text, self.settings)]
        if not chosen:
            self.note_unmatched(filters)
        return chosen[:limit]

    def note_unmatched(self, filters: Mapping[str, Any]) -> None:
        """Warn (:class:`NoMatchWarning`, a note) when the ``operator`` of a read's
        ``filters`` that found nothing matches no experiment the store holds, or its
        ``dtype`` or ``env`` none of that operator's (of the store's, with no operator):
        the answer is empty for a typo or another spelling, not for what was meant; the
        closest recorded are named. Called on an empty answer alone (no other read pays
        for it)."""
        given = {
            name: value
            for name in ("operator", "dtype", "env")
            if isinstance(value := filters.get(name), str) and value
        }
        if not given:
            return
        found, _ = self._read(None, held_answer)  # its invalid files: warned by the read
        rows = found.rows
        operator = given.get("operator")
        if operator is not None:
            note = unmatched_operator(rows, operator)
            if note is not None:
                warnings.warn(note, NoMatchWarning, stacklevel=3)
                return
            rows = [row for row in rows if part_of("operator_sig", operator, row.operator_sig)]
        for name in ("dtype", "env"):
            if name in given:
                note = unmatched_value(rows, name, given[name], operator)
                if note is not None:
                    warnings.warn(note, NoMatchWarning, stacklevel=3)

    def _best(self, filters: dict[str, Any], skips: tuple[bool, bool, bool], *, strict: bool,
              by: str, limit: int) -> tuple[list[Row], Callable[[Row], Derived]]:  # fmt: skip
        """The rows ``top`` chooses (``skips``: leave out buggy, pending, controls), and
        what is derived of each: the answer kept for an unchanged working tree when there
        is one (:mod:`kexp.storage.answers`), else ranked (and kept)."""
        plain = not any(filters.get(name) for name in ("pid", "base_commit", "reachable_from"))
        question = (by, limit, skips, build_filters(**filters)) if plain else None
        found, held = self._read(question, held_answer)
        for path, error in held.invalid if held else found.invalid:
            skip_invalid(self, path, error, strict)
        if held is not None:
            return held.rows, held.of
        rows, _, derivation = self._rows(filters, strict=strict, skips=skips, found=found)
        best = rank(rows, by=by, derivation=derivation, limit=limit)
        if (name := answer_name(found, question)) is not None:
            cache = self.open_cache()
            try:
                keep_answer(cache, name, Answer(best, derivation.of, found.invalid), found)
            finally:
                cache.close()
        return best, derivation.of

    def _resolve_filter_ids(self, filters: dict[str, Any], found: Found) -> dict[str, Any]:
        resolved = dict(filters)
        if resolved.get("pid"):
            resolved["pid"] = self.resolve_id(resolved["pid"], found=found)
        if resolved.get("base_commit"):
            from kexp.gitops.provenance import base_commit_filter

            resolved["base_commit"] = base_commit_filter(self.code_repo, resolved["base_commit"])
        return resolved

    # --- ids: which experiment an id names (kexp.storage.idlookup) -------------------

    def id_index(self, prefix: str = "") -> dict[str, list[Path]]:
        """Ids (starting with ``prefix``) → their files in the working tree (in path
        order), from the file names alone."""
        return self._id_finder(prefix)(prefix)

    def _id_finder(self, only: str = "") -> Callable[[str], dict[str, list[Path]]]:
        """A function from an id prefix to the ids starting with it and their files (in
        path order): see :func:`kexp.storage.idindex.id_finder`."""
        return id_finder(self, only)

    def resolve_id(self, id_or_prefix: str, *, found: Found | None = None) -> str:
        """The full id of the one experiment whose id starts with ``id_or_prefix`` (in any
        place the store reads; among those ``found`` by a read, when given): see
        :func:`kexp.storage.idlookup.id_among`."""
        if self.source.places is None and found is None:
            return self._find(id_or_prefix)[0]
        prefix = ids.check_prefix(id_or_prefix, self.settings.min_id_prefix)
        return id_among(self, prefix, found if found is not None else self.found())

    def not_found_here(self, id_or_prefix: str, error: KexpError) -> KexpError:
        """``error`` (no experiment ``id_or_prefix`` names where this store looked) saying,
        for a read of the working tree alone, which refs hold it and how to read it there
        (:func:`kexp.storage.refs.on_other_refs`): every read that looks an id up says it
        alike (``kexp show``, ``kexp tree``, ``kexp log``, the MCP tools)."""
        from kexp.storage.refs import on_other_refs

        return on_other_refs(self, id_or_prefix, error)

    def resolve_references(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """``fields`` with id prefixes in ``pid`` and ``combines`` expanded to full ids
        (:class:`ExperimentNotFoundError` or :class:`AmbiguousIdError` for a prefix that
        names no experiment or several): see :func:`kexp.storage.idlookup.resolve_references`."""
        return resolve_references(self, fields, self._held_files)

    def _find(
        self, id_or_prefix: str, *, writing: bool = False, removing: bool = False
    ) -> tuple[str, Path]:
        """The full id and the file of the one experiment of the working tree (or the
        revision) whose id starts with ``id_or_prefix``: see
        :func:`kexp.storage.idlookup.find_file`."""
        return find_file(self, id_or_prefix, self._held_files, writing=writing, removing=removing)

    @contextlib.contextmanager
    def holding(self, full_id: str) -> Iterator[None]:
        """For the block, which holds ``full_id``'s write lock (no kexp writer moves or
        removes its file meanwhile), the id is looked up once, now: a write's several
        reads of it (the record, its correction, the update) walk the store's folders
        once, not each time."""
        if full_id in self._held_files:  # an outer block holds it already
            yield
            return
        self._held_files[full_id] = self._find(full_id, writing=True)[1]
        try:
            yield
        finally:
            del self._held_files[full_id]

    def path_of(self, exp_id: str, *, writing: bool = False, removing: bool = False) -> Path:
        """The file of the experiment with this id (or unique prefix); ``writing``: for
        a write, which must find it in the working tree, ``removing`` for a removal
        (see :func:`kexp.storage.idlookup.find_file`)."""
        return self._find(exp_id, writing=writing, removing=removing)[1]

    # --- one experiment ---------------------------------------------------------------

    def get_experiment(self, exp_id: str) -> KernelExperiment:
        """The experiment with this id or unique id prefix (≥ 4 characters); read across
        refs, its newest version. Raises :class:`ExperimentNotFoundError`,
        :class:`AmbiguousIdError`, or :class:`ValidationError` when its file is invalid."""
        if self.source.places is not None:
            found = self.found()
            full = self.resolve_id(exp_id, found=found)
            rows = [row for row in found.rows if row.id == full]
            if not rows:
                where, error = next((p, e) for p, e in found.invalid if id_from_name(p) == full)
                if isinstance(error, str):
                    raise ValidationError(error, [])
                file = self.experiments_dir / where
                problem = error if isinstance(error, Problem) else problem_at(file, error)
                raise ValidationError(f"{file} is not a valid experiment", [problem])
            if len(rows) > 1:
                raise used_twice(full, [row.path for row in rows], self.root)
            return whole_experiments(self, rows, found.derivation(self.settings).of, strict=True)[0]
        path = self._find(exp_id)[1]
        checked = self.check_file(path)
        if not checked.ok:
            if self.source.vanished(path):
                raise ExperimentNotFoundError(f"experiment {exp_id} was deleted meanwhile")
            raise ValidationError(f"{path} is not a valid experiment", checked.problems)
        exp = attach(checked.experiment(), self.settings)
        # What is derived of it read when first asked for: a write reading its parent's
        # kernel asks for none of it.
        return attach(exp, derived=lambda: self.derived_of(exp))

    def derived_of(
        self, exp: KernelExperiment, *, controls: dict[str, dict[str, list[Row]]] | None = None
    ) -> Derived:
        """What the store derives of ``exp`` (as its file holds it): from the experiments
        it depends on alone, read file by file, when the store reads no refs and they are
        few, and the control of its env (of ``controls``, the store's as
        :func:`~kexp.core.campaign.env_controls` gives them, when the caller read them: a
        write's read before it; else :meth:`control_rows`) when it is a change that
        control may judge (:func:`kexp.storage.derivedof.derived_from_lineage`); else from
        the whole store's derivation."""
        if self.source.places is None:
            found = derived_from_lineage(self, exp, controls)
            if found is not None:
                return found
        with warnings.catch_warnings():  # the others' problems are not this read's
            warnings.simplefilter("ignore", InvalidExperimentWarning)
            return self.derivation().of(exp)

    def control_rows(self) -> list[Row]:
        """The rows of the store's controls (:func:`kexp.storage.controls.control_rows`)."""
        return control_rows(self)

    # --- git: the store at a revision, across refs, history, changes -------------------

    def at(self: _S, revision: str) -> _S:
        """The store as it was at ``revision`` (hash, branch, tag, ``HEAD~1``): at the
        commit it names now, kept (``at("HEAD")`` stays on that commit after another
        commit or a fetch; its repr names the commit: call ``at`` again to follow it).

        Read straight from git objects, without a checkout and without touching the
        working tree; the same query and validation API; read-only (writes raise
        :class:`KexpError`). Raises :class:`~kexp.core.errors.GitError` outside a git
        repository or for an unknown revision.
        """
        from kexp.storage.snapshot import GitRevision

        source = GitRevision(self.root, revision)
        return type(self)(
            self.root, code_repo=self.code_repo, settings=self.settings, source=source
        )

    def with_refs(self: _S, refs: Sequence[str] = (), *, all_refs: bool = False) -> _S:
        """This store read with the store at every ref matching ``refs`` (``origin/*``)
        or, with ``all_refs``, at every branch and remote-tracking branch: one entry per
        experiment, its newest version (see :mod:`kexp.storage.refs`). The store itself when no
        ref is asked for."""
        if not refs and not all_refs:
            return self
        return type(self)(self.root, code_repo=self.code_repo, settings=self.settings,
                          refs=refs, all_refs=all_refs)  # fmt: skip

    def history(self, exp_id: str, *, revision: str | None = None) -> list[HistoryEntry]:
        """Every commit that touched an experiment's file, oldest first, with the
        fields each changed (see :func:`kexp.storage.history.history`); an id prefix is
        looked up at ``revision``, when given, as the history is read there. Read with
        refs: then the commits those refs hold that ``HEAD`` lacks, each with its refs
        (:func:`kexp.storage.refhistory.history_across`)."""
        from kexp.storage.history import history

        if self.source.places is not None and revision is None:
            from kexp.storage.refhistory import history_across

            return history_across(self, exp_id)
        if revision is not None and self.is_working_tree and self.source.places is None:
            return history(self.at(revision), exp_id, revision=revision)
        return history(self, exp_id, revision=revision)

    def changes(self, base: str, head: str | None = None) -> Changes:
        """Experiments added, modified and removed between two revisions (``head`` None:
        the working tree); see :func:`kexp.storage.history.changes`."""
        from kexp.storage.history import changes

        return changes(self, base, head)

    def file_records(self) -> list[tuple[str, Row | None]] | None:
        """(path relative to ``experiments/``, its row: front-matter values in
        :data:`kexp.storage.rows.VALUE_FIELDS` order first, or None for an invalid file)
        of every file of the working tree, in path order, from the cache (only the files
        changed since are read); None for a store that keeps no cache (at a revision).
        Invalid files, and ids several files hold, are not warned about (validation, its
        reader, says so of each file)."""
        if not self.source.cacheable:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InvalidExperimentWarning)
            warnings.simplefilter("ignore", DuplicateIdWarning)
            listing = self.found().listing
        if listing is None:
            return None
        return listing.records()

    # --- lineage -------------------------------------------------------------------

    def ancestors(self, exp_id: str) -> list[KernelExperiment]:
        """The parent, grandparent, ... of an experiment (nearest first; stops at a cycle)."""
        found = self.found()
        derivation = found.derivation(self.settings)
        by_id = derivation.records()  # in path order: the first file of an id
        current = by_id.get(self.resolve_id(exp_id, found=found))
        chain: list[Row] = []
        seen = {current.id} if current else set()
        while current is not None and current.pid and current.pid in by_id:
            if current.pid in seen:
                break
            current = by_id[current.pid]
            seen.add(current.id)
            chain.append(current)
        return whole_experiments(self, chain, derivation.of)

    def children(self, exp_id: str) -> list[KernelExperiment]:
        """The experiments whose ``pid`` is this experiment, oldest first."""
        found = self.found()
        full_id = self.resolve_id(exp_id, found=found)
        kids = [row for row in found.rows if row.pid == full_id]
        return whole_experiments(self, chronological(kids), found.derivation(self.settings).of)

    def descendants(self, exp_id: str) -> list[KernelExperiment]:
        """Children, grandchildren, ... of an experiment (breadth first)."""
        found = self.found()
        kids: dict[str, list[Row]] = {}
        for row in chronological(found.rows):
            kids.setdefault(row.pid, []).append(row)
        queue, chosen, seen = [self.resolve_id(exp_id, found=found)], [], set()
        while queue:
            current = queue.pop(0)
            for child in kids.get(current, []):
                if child.id not in seen:
                    seen.add(child.id)
                    chosen.append(child)
                    queue.append(child.id)
        return whole_experiments(self, chosen, found.derivation(self.settings).of)

    # --- validation ------------------------------------------------------------------

    def validate(self, paths: list[Path] | None = None, *, strict: bool = False) -> list[Problem]:
        """Every problem in the given files (all by default), plus store-wide checks.

        ``base_commit`` must resolve in the code repository: a commit that is not there
        (a shallow clone, an upstream commit never fetched) is a warning saying how to
        fetch it, an error with ``strict=True``. Without a git repository that check is
        skipped.

        Every file of the store is read (the store-wide checks need their ids), one after
        the other: what is kept of each is its problems and what the store-wide checks
        need (:class:`~kexp.format.filelinks.FileLinks`), so memory does not grow with the
        files' contents. A file with a store-wide problem is read again for its position.
        """
        return self.validate_counted(paths, strict=strict)[0]

    def validate_counted(
        self, paths: list[Path] | None = None, *, strict: bool = False
    ) -> tuple[list[Problem], int]:
        """:meth:`validate`, and how many experiment files the store holds (all of them
        are read): see :func:`kexp.storage.validation.validate_store`."""
        return validate_store(self, paths, strict=strict)


def _as_list(value: Any) -> list[Any]:
    """A filter value given as one value or a list, as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
