"""The predecessor's helpers, on top of kexp (installed with the package).

Code and agent skills written for the single-JSON-file tool keep working:
``from kernel_exp_dataclass import list_experiments, top_experiments, ...``. Names,
arguments, field names and return types are the predecessor's:

* ``get_experiment(exp_id)`` returns ``None`` when there is no such experiment;
* ``top_experiments(...)`` returns dicts of the key fields, best first;
* ``update_experiment(exp_id, **changes)`` raises ``KeyError`` for an unknown id;
* ``create_experiment(exp)`` returns the new experiment's id.

New code should use :mod:`kexp` itself.
"""

from __future__ import annotations

from typing import Any

import kexp
from kexp import KernelExperiment
from kexp.errors import ExperimentNotFoundError, InvalidIdError

__all__ = [
    "KernelExperiment",
    "create_experiment",
    "delete_experiment",
    "get_experiment",
    "list_experiments",
    "top_experiments",
    "update_experiment",
]

#: The keys of the dicts ``top_experiments`` returns.
TOP_KEYS = (
    "id",
    "pid",
    "score",
    "change_summary",
    "operator_sig",
    "dtype_sig",
    "env",
    "status",
    "is_buggy",
    "base_commit",
    "created_at",
)


def list_experiments(**filters: Any) -> list[KernelExperiment]:
    """Every valid experiment in the store (optionally filtered), oldest first."""
    return kexp.list_experiments(**filters)


def top_experiments(max_results: int = 20, **filters: Any) -> list[dict[str, Any]]:
    """The best experiments by score as dicts of their key fields."""
    return [
        {key: getattr(exp, key) for key in TOP_KEYS}
        for exp in kexp.top_experiments(max_results, **filters)
    ]


def get_experiment(exp_id: str) -> KernelExperiment | None:
    """The experiment with this id (or unique prefix), or ``None``.

    A string that cannot be an id (or is too short a prefix) names no experiment either:
    ``None``, as the predecessor's dict lookup gave.
    """
    try:
        return kexp.get_experiment(exp_id)
    except (ExperimentNotFoundError, InvalidIdError):
        return None


def create_experiment(exp: KernelExperiment | None = None, **fields: Any) -> str:
    """Record a new experiment; returns its id."""
    return kexp.create_experiment(exp, **fields).id


def update_experiment(exp_id: str, **changes: Any) -> KernelExperiment:
    """Change fields of an experiment; ``KeyError`` if there is no such id."""
    try:
        return kexp.update_experiment(exp_id, **changes)
    except InvalidIdError as exc:
        raise KeyError(exp_id) from exc


def delete_experiment(exp_id: str) -> bool:
    """Delete an experiment; ``False`` if there was none."""
    try:
        kexp.delete_experiment(exp_id)
    except (ExperimentNotFoundError, InvalidIdError):
        return False
    return True
