"""What is derived of one experiment from the few files it depends on alone: its
ancestors back to a reference measurement and what they combine, read file by file (at
most :data:`LINEAGE_FILES`), and the control of its env when it is a change that control
may judge. What :meth:`kexp.storage.reader.StoreReader.derived_of` answers before it asks
the whole store's derivation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kexp.core import ids
from kexp.core.campaign import (
    code_depends_on,
    depends_on,
    derive,
    env_controls,
    judged_by_control,
    may_meet_control,
    stands_alone,
)

if TYPE_CHECKING:
    from kexp.core.cumulative import Derived
    from kexp.core.model import KernelExperiment
    from kexp.storage.rows import Row
    from kexp.storage.view import StoreView


#: How many files :meth:`kexp.storage.reader.StoreReader.get_experiment` reads one by one
#: for an experiment's lineage before it asks the whole store instead.
LINEAGE_FILES = 64


def derived_from_lineage(
    store: StoreView,
    exp: KernelExperiment,
    controls: dict[str, dict[str, list[Row]]] | None = None,
) -> Derived | None:
    """What ``store`` derives of ``exp`` (as its file holds it), from the experiments it
    depends on alone (:func:`lineage_files`), and the control of its env (of
    ``controls``, the store's as :func:`~kexp.core.campaign.env_controls` gives them, when
    the caller read them; else the store's ``control_rows()``) when it is a change that
    control may judge (:func:`kexp.core.campaign.may_meet_control`). None when only the
    whole store's derivation can answer (past :data:`LINEAGE_FILES` files, at an id
    several files hold)."""
    found: Derived | None = None
    if stands_alone(exp):  # what is derived of it depends on no other experiment
        found = derive([exp], store.settings).of(exp)
    elif (lineage := lineage_files(store, exp)) is not None:
        found = derive(lineage[0], store.settings, lineage[1]).of(exp)
    if found is None:
        return None
    # a change: the control of its env may judge it
    if not may_meet_control(found):
        return found
    if controls is None:
        controls = env_controls(store.control_rows())
    return judged_by_control(exp, found, controls, store.settings)


def lineage_files(
    store: StoreView, exp: KernelExperiment
) -> tuple[list[KernelExperiment], set[str]] | None:
    """``exp`` and every experiment what is derived of it depends on (its ancestors
    back to a reference measurement, and what they combine), each read from its file
    as :meth:`kexp.storage.reader.StoreReader.get_experiment` reads one, and the ids
    among them whose file is invalid: what :func:`derive` needs to give ``exp`` the values
    the whole store's derivation gives it (tests/test_campaign.py holds the two equal).
    None past :data:`LINEAGE_FILES` files or at an id several files hold: then the whole
    store's derivation answers."""
    records = [exp]
    invalid: set[str] = set()
    seen = {exp.id}
    wanted = depends_on(exp)
    while wanted:
        exp_id = wanted.pop()
        if exp_id in seen:
            continue
        seen.add(exp_id)
        if not ids.is_valid_id(exp_id):
            continue  # no file holds it: "not in the store"
        if len(records) >= LINEAGE_FILES:
            return None
        paths = store.id_index(exp_id).get(exp_id, [])
        if len(paths) > 1:
            return None
        if not paths:
            continue
        checked = store.check_file(paths[0])
        if not checked.ok:
            invalid.add(exp_id)  # no experiment of the store: "invalid"
            continue
        record = checked.experiment()
        records.append(record)
        wanted.extend(code_depends_on(record))
    return records, invalid
