"""kexp: a git-native history of GPU kernel optimization experiments.

Each experiment is one Markdown file with YAML front-matter under ``experiments/``.
The module-level functions act on the default store (``$KEXP_ROOT``, else the nearest
folder above the working directory that holds ``experiments/``). :class:`Store` has some
of them as methods for a folder given (the README's "A store given" names which); each
of the others is a library call that takes the store as its first argument.
"""

# The public names are imported on first use (PEP 562), so that ``import kexp`` and the
# ``kexp`` command start fast: the store, the file format and YAML load only when needed.

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from kexp.agents.context import Packet
    from kexp.agents.lessons import LessonReport
    from kexp.core.errors import (
        AmbiguousIdError,
        DeleteRefusedError,
        ExperimentExistsError,
        ExperimentNotFoundError,
        GitError,
        InvalidExperimentWarning,
        InvalidIdError,
        KexpError,
        LockTimeoutError,
        StoreNotFoundError,
        SyncConflictError,
        ValidationError,
    )
    from kexp.core.model import KernelExperiment
    from kexp.core.problems import Problem
    from kexp.core.settings import DEFAULT_SETTINGS, Settings
    from kexp.output.html import ReportResult
    from kexp.review.model import Review
    from kexp.storage.history import Changes, ExperimentChange, HistoryEntry
    from kexp.storage.lineage import TreeNode
    from kexp.storage.location import find_root, init_store
    from kexp.storage.migration import LayoutMigration
    from kexp.storage.retrieval import Match
    from kexp.storage.stats import Stats
    from kexp.storage.store import Removal, Store
    from kexp.storage.syncresult import SyncResult

from kexp.core.version import __version__ as __version__

__all__ = [
    "DEFAULT_SETTINGS",
    "AmbiguousIdError",
    "Changes",
    "DeleteRefusedError",
    "ExperimentChange",
    "ExperimentExistsError",
    "ExperimentNotFoundError",
    "GitError",
    "HistoryEntry",
    "InvalidExperimentWarning",
    "InvalidIdError",
    "KernelExperiment",
    "KexpError",
    "LayoutMigration",
    "LockTimeoutError",
    "Problem",
    "Removal",
    "Settings",
    "Store",
    "StoreNotFoundError",
    "SyncConflictError",
    "SyncResult",
    "ValidationError",
    "__version__",
    "ancestors",
    "changes",
    "children",
    "context",
    "create_experiment",
    "default_store",
    "delete_experiment",
    "find_root",
    "get_experiment",
    "history",
    "init_store",
    "lessons",
    "list_experiments",
    "migrate_layout",
    "record_iteration",
    "remeasure",
    "remove_experiment",
    "report",
    "review_changes",
    "similar",
    "stats",
    "sync",
    "top_experiments",
    "tree",
    "update_experiment",
    "validate",
]

#: Where each lazily imported public name lives.
_LAZY = {
    "Changes": "kexp.storage.history",
    "ExperimentChange": "kexp.storage.history",
    "HistoryEntry": "kexp.storage.history",
    "AmbiguousIdError": "kexp.core.errors",
    "DeleteRefusedError": "kexp.core.errors",
    "ExperimentExistsError": "kexp.core.errors",
    "ExperimentNotFoundError": "kexp.core.errors",
    "GitError": "kexp.core.errors",
    "InvalidIdError": "kexp.core.errors",
    "KexpError": "kexp.core.errors",
    "LockTimeoutError": "kexp.core.errors",
    "StoreNotFoundError": "kexp.core.errors",
    "SyncConflictError": "kexp.core.errors",
    "SyncResult": "kexp.storage.syncresult",
    "LayoutMigration": "kexp.storage.migration",
    "ValidationError": "kexp.core.errors",
    "KernelExperiment": "kexp.core.model",
    "Problem": "kexp.core.problems",
    "DEFAULT_SETTINGS": "kexp.core.settings",
    "Settings": "kexp.core.settings",
    "InvalidExperimentWarning": "kexp.core.errors",
    "Store": "kexp.storage.store",
    "Removal": "kexp.storage.store",
    "find_root": "kexp.storage.location",
    "init_store": "kexp.storage.location",
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above

    def __getattr__(name: str) -> Any:
        """Import a public name (or a submodule, as ``import kexp`` once did) on first use."""
        import importlib  # lazy: import kexp alone loads no importlib

        module_name = _LAZY.get(name)
        if module_name is not None:
            value = getattr(importlib.import_module(module_name), name)
            globals()[name] = value  # later lookups are plain attribute reads
            return value
        if not name.startswith("_"):
            from importlib.util import find_spec  # lazy: only to find a submodule

            if find_spec(f"{__name__}.{name}") is not None:
                return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def default_store(refs: Sequence[str] = (), *, all_refs: bool = False) -> Store:
    """The store found from ``$KEXP_ROOT`` or the working directory (see :func:`find_root`);
    with ``refs`` (patterns such as ``origin/*``) or ``all_refs``, read with the store at
    those refs too: one entry per experiment, its newest version."""
    # lazy: import kexp loads nothing of the library
    from kexp.storage.location import find_root
    from kexp.storage.store import Store

    return Store(find_root(), refs=refs, all_refs=all_refs)


def list_experiments(
    *, strict: bool = False, refs: Sequence[str] = (), all_refs: bool = False, **filters: Any
) -> list[KernelExperiment]:
    """Every valid experiment matching ``filters``, oldest first (see :class:`Store`);
    ``refs``/``all_refs``: across refs (see :func:`default_store`)."""
    store = default_store(refs, all_refs=all_refs)
    return store.list_experiments(strict=strict, **filters)


def top_experiments(
    max_results: int = 20, *, refs: Sequence[str] = (), all_refs: bool = False, **filters: Any
) -> list[KernelExperiment]:
    """The best experiments by score; buggy and pending ones left out unless asked for;
    ``refs``/``all_refs``: across refs (see :func:`default_store`)."""
    return default_store(refs, all_refs=all_refs).top_experiments(max_results, **filters)


def get_experiment(
    exp_id: str, *, refs: Sequence[str] = (), all_refs: bool = False
) -> KernelExperiment:
    """The experiment with this id or unique prefix (across refs: its newest version);
    raises if there is none."""
    return default_store(refs, all_refs=all_refs).get_experiment(exp_id)


def create_experiment(
    exp: KernelExperiment | None = None,
    *,
    refs: Sequence[str] = (),
    all_refs: bool = False,
    **fields: Any,
) -> KernelExperiment:
    """Validate and record a new experiment; returns it with ``id`` and ``path`` set.
    With ``refs``/``all_refs``, the "tried before" warning reads those refs too."""
    return default_store(refs, all_refs=all_refs).create_experiment(exp, **fields)


def update_experiment(
    exp_id: str, *, reason: str | None = None, **changes: Any
) -> KernelExperiment:
    """Change fields of an experiment (validated, atomic, only changed lines rewritten):
    ``kexp update ID --set FIELD=VALUE ... [--reason REASON]`` in one call
    (:func:`kexp.measure.corrections.correct`): a new ``score`` restates the summary's
    figure and drops the old measurement's ``score_ci``, warning of what still holds it;
    ``reason`` appends the dated correction note (old → new values and the reason)."""
    # lazy: import kexp loads nothing of the library
    from kexp.measure.corrections import correct

    return correct(default_store(), exp_id, changes, reason)


def delete_experiment(exp_id: str, *, force: bool = False) -> Path:
    """Delete an experiment's file (refused while others name it as parent)."""
    return default_store().delete_experiment(exp_id, force=force)


def remove_experiment(
    exp_id: str, *, force: bool = False, confirm: Callable[[Removal], bool] | None = None
) -> Removal:
    """``kexp rm`` in one call: delete an experiment's file unless others name it as
    parent or combine it (``force`` deletes anyway), after ``confirm`` answers True when
    given; says what happened (see :meth:`kexp.Store.remove_experiment`)."""
    return default_store().remove_experiment(exp_id, force=force, confirm=confirm)


def ancestors(exp_id: str) -> list[KernelExperiment]:
    """Parent, grandparent, ... of an experiment, nearest first."""
    return default_store().ancestors(exp_id)


def children(exp_id: str) -> list[KernelExperiment]:
    """Experiments whose parent is this one, oldest first."""
    return default_store().children(exp_id)


def record_iteration(**arguments: Any) -> KernelExperiment:
    """Record one iteration in one call: timings in, score, results and raw_result
    computed, validated and written (see :func:`kexp.measure.record.record_iteration`)."""
    # lazy: import kexp loads nothing of the library
    from kexp.measure.record import record_iteration as record

    return record(default_store(), **arguments)


def remeasure(exp_id: str, **arguments: Any) -> KernelExperiment:
    """Add a round of measurement to an experiment: its samples pooled with the earlier
    rounds, score and interval recomputed, the correction recorded (see
    :func:`kexp.measure.remeasure.remeasure`)."""
    # lazy: import kexp loads nothing of the library
    from kexp.measure.remeasure import remeasure as add_round

    return add_round(default_store(), exp_id, **arguments)


def report(
    output: Path | str | None = None,
    *,
    refs: Sequence[str] = (),
    all_refs: bool = False,
    **filters: Any,
) -> ReportResult:
    """Write the static HTML report of the default store's experiments matching
    ``filters`` to ``output`` (default ``.kexp/report``); see
    :func:`kexp.output.html.build_report`. ``refs``/``all_refs``: across refs."""
    # lazy: import kexp loads nothing of the library
    from kexp.output.html import build_report

    return build_report(default_store(refs, all_refs=all_refs), output, **filters)


def validate(
    paths: list[Path] | None = None,
    *,
    strict: bool = False,
    refs: Sequence[str] = (),
    all_refs: bool = False,
) -> list[Problem]:
    """Every validation problem of the default store (or of ``paths`` in it); across
    refs, of every experiment's newest version.

    ``strict=True`` makes a ``base_commit`` missing from the code repository an error.
    """
    return default_store(refs, all_refs=all_refs).validate(paths, strict=strict)


def history(exp_id: str, *, revision: str | None = None) -> list[HistoryEntry]:
    """Every commit that touched an experiment's file, oldest first: author, date,
    message and the fields it changed (old, new), following renames."""
    return default_store().history(exp_id, revision=revision)


def changes(base: str, head: str | None = None) -> Changes:
    """Experiments added, modified (with changed fields) and removed between two
    revisions of the default store (``head`` None: the working tree)."""
    return default_store().changes(base, head)


def context(
    *,
    operator: str,
    dtype: str | None = None,
    env: str | None = None,
    text: str | None = None,
    diff: str | None = None,
    budget: int = 4000,
    output: str = "markdown",
    refs: Sequence[str] = (),
    all_refs: bool = False,
) -> Packet:
    """What to read before the next iteration on ``operator``, in one packet of at most
    ``budget`` tokens (``.text`` Markdown or JSON, ``.data``): the best and its lineage,
    related failures and successes, what not to repeat, what was never tried (see
    :func:`kexp.agents.context.context`); ``refs``/``all_refs``: what other agents synced too."""
    # lazy: import kexp loads nothing of the library
    from kexp.agents.context import context as make_context

    return make_context(
        default_store(refs, all_refs=all_refs),
        operator=operator,
        dtype=dtype,
        env=env,
        text=text,
        diff=diff,
        budget=budget,
        output=output,
    )


def similar(
    *,
    text: str | None = None,
    diff: str | None = None,
    exp_id: str | None = None,
    limit: int = 10,
    operator: str | None = None,
    dtype: str | None = None,
    env: str | None = None,
    refs: Sequence[str] = (),
    all_refs: bool = False,
) -> list[Match]:
    """The experiments most related to a plan (``text``), a diff or an experiment, best
    first (see :func:`kexp.storage.retrieval.similar`); ``refs``/``all_refs``: across refs."""
    # lazy: import kexp loads nothing of the library
    from kexp.storage.retrieval import similar as find_similar

    return find_similar(
        default_store(refs, all_refs=all_refs),
        text=text,
        diff=diff,
        exp_id=exp_id,
        limit=limit,
        operator=operator,
        dtype=dtype,
        env=env,
    )


def sync(
    *,
    branch: str | None = None,
    remote: str = "origin",
    message: str | None = None,
    dry_run: bool = False,
    attempts: int = 20,
) -> SyncResult:
    """Publish the default store's experiments: commit the files under ``experiments/``
    (nothing else), fetch ``remote``, merge when both moved, push (retried when another
    clone pushed first; never forced). See :func:`kexp.storage.sync.sync`."""
    # lazy: import kexp loads nothing of the library
    from kexp.storage.sync import sync as publish

    return publish(
        default_store(),
        branch=branch,
        remote=remote,
        message=message,
        dry_run=dry_run,
        attempts=attempts,
    )


def migrate_layout(*, dry_run: bool = False) -> LayoutMigration:
    """Move the default store's month-layout files into
    ``experiments/<YYYY>/<MM>/<xx>/`` (staged as renames in git); ``dry_run`` says what
    would move. See :func:`kexp.storage.migration.migrate_layout`."""
    from kexp.storage.migration import migrate_layout as migrate

    return migrate(default_store(), dry_run=dry_run)


def lessons(*, refs: Sequence[str] = (), all_refs: bool = False, **filters: Any) -> LessonReport:
    """``kexp lessons``: the failures to learn from among the experiments matching
    ``filters``, with their key insights and each env's noise floor (see
    :func:`kexp.agents.lessons.lesson_report`). ``refs``/``all_refs``: across refs."""
    # lazy: import kexp loads nothing of the library
    from kexp.agents.lessons import lesson_report

    return lesson_report(default_store(refs, all_refs=all_refs), **filters)


def stats(*, refs: Sequence[str] = (), all_refs: bool = False, **filters: Any) -> Stats:
    """``kexp stats``: counts per operator and outcome and the best cumulative score per
    operator, dtype and env of the experiments matching ``filters`` (see
    :func:`kexp.storage.stats.stats`). ``refs``/``all_refs``: across refs."""
    # lazy: import kexp loads nothing of the library
    from kexp.storage.stats import stats as store_stats

    return store_stats(default_store(refs, all_refs=all_refs), **filters)


def tree(
    exp_id: str | None = None,
    *,
    refs: Sequence[str] = (),
    all_refs: bool = False,
    **filters: Any,
) -> list[TreeNode]:
    """``kexp tree``: the lineage trees of the experiments matching ``filters``, or, with
    ``exp_id``, the one tree of that experiment's ancestors and descendants (see
    :mod:`kexp.storage.lineage`). ``refs``/``all_refs``: across refs."""
    # lazy: import kexp loads nothing of the library
    from kexp.core.errors import KexpError
    from kexp.storage import lineage

    store = default_store(refs, all_refs=all_refs)
    if exp_id is not None:
        if filters:
            raise KexpError("give an experiment id or filters, not both")
        return [lineage.lineage_of(store, exp_id)]
    return lineage.lineage_forest(store, **filters)


def review_changes(base: str, head: str | None = None) -> Review:
    """``kexp review``: what ``head`` (default: the working tree) changes in the store
    since ``base`` (from their merge base, as a forge's pull request): the experiments
    added, corrected and removed, their problems and lessons (see
    :func:`kexp.review.build.review`; :func:`kexp.review.render.render_markdown` makes
    the pull-request comment of it)."""
    # lazy: import kexp loads nothing of the library
    from kexp.review.build import review

    return review(default_store(), base, head)
