"""Experiments made of a query's rows: brief ones (front-matter only, from the rows) or
whole ones (bodies read from their files), each with what is derived of it; a file
found invalid is skipped with a warning naming its first problem (or, ``strict``,
raised). What :class:`kexp.storage.reader.StoreReader`'s reads give back.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from kexp.core.collector import collector_paused
from kexp.core.errors import InvalidExperimentWarning, ValidationError
from kexp.core.model import KernelExperiment, attach
from kexp.core.problems import Problem, sort_problems
from kexp.storage.rows import Row, problem_at

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from kexp.core.cumulative import Derived
    from kexp.storage.view import StoreView


def skip_invalid(store: StoreView, path: str, error: Any, strict: bool) -> None:
    """Warn about (or, ``strict``, raise for) an invalid file found by a read."""
    file = store.experiments_dir / path
    if isinstance(error, str):  # already said where (another place than the tree)
        if strict:
            raise ValidationError(error, [])
        warnings.warn(
            f"skipped invalid experiment file {error}", InvalidExperimentWarning, stacklevel=4
        )
        return
    if store.is_working_tree and store.source.vanished(file):
        return  # deleted by another process since it was listed: no longer in the store
    problem = error if isinstance(error, Problem) else problem_at(file, error)
    if strict:
        raise ValidationError(f"{file} is not a valid experiment", [problem])
    warnings.warn(
        f"skipped invalid experiment file {problem.format()}",
        InvalidExperimentWarning,
        stacklevel=4,
    )


@collector_paused()  # an experiment a row, none in a cycle
def brief_experiments(
    store: StoreView, rows: Iterable[Row], of: Callable[[Row], Derived]
) -> list[KernelExperiment]:
    """Experiments (front-matter only, bodies empty) of rows, with what is derived of
    each (``of``: :meth:`kexp.core.campaign.Derivation.of`)."""
    settings, folder = store.settings, store.experiments_dir
    return [attach(row.to_experiment(folder), settings, derived=of(row)) for row in rows]


def whole_experiments(
    store: StoreView, rows: Sequence[Row], of: Callable[[Row], Derived], *, strict: bool = False
) -> list[KernelExperiment]:
    """The whole experiments (bodies read) of rows, with what is derived of each
    (``of``); a file that became invalid since it was listed is skipped with a
    warning."""
    complete: list[KernelExperiment] = []
    for row, checked in zip(rows, store.source.check_found(rows, store.settings), strict=True):
        if not checked.ok:
            first = next(p for p in sort_problems(checked.problems) if p.severity == "error")
            skip_invalid(store, row.path, first, strict)
            continue
        exp = checked.experiment()
        complete.append(
            attach(exp, store.settings, path=store.experiments_dir / row.path,
                   derived=of(row), where=row.sighting())
        )  # fmt: skip
    return complete
