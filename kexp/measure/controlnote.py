"""What a control just recorded does to the steps already recorded on its env: those it
finds within its drift (:func:`kexp.core.outcome.within_drift`) that no control found so
before are ``marginal`` now, in every view; those that the controls before it found
within theirs and that no longer are (the drifted one aged out of the window of the
newest, ``Settings.control_drift_window``) are judged by their own numbers again;
``kexp add`` says which, in one line each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.campaign import (
    control_for,
    derive_for,
    env_controls,
    may_meet_control,
)
from kexp.core.outcome import floor_reach, judged_over_parent, within_drift
from kexp.core.spelling import canonical

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store

#: The steps a control's note names at most (the rest are counted).
NAMED_STEPS = 5


def turned_marginal(
    store: Store, control: KernelExperiment, before: dict[str, dict[str, list[Any]]]
) -> str | None:
    """``control N: 2 step(s) recorded on its env are within its 8.5 % drift on 'cpu' (2
    x its 4.2 %), marginal now (...): A (improvement 1.0309 [1.0293, 1.0326]), B``; None
    when it turns none: a step judged by it (the largest drift of its env's newest
    controls). ``before``: the controls before it was recorded
    (:func:`kexp.core.campaign.env_controls`): a step they found within their drift
    already is not named."""
    found = store.found()
    rows = _on_its_env(found.rows, control)
    if not rows:
        return None
    derivation = derive_for(found.rows, rows, store.settings)
    controls = env_controls(found.rows)
    window = store.settings.control_drift_window
    named: list[str] = []
    reason = ""
    for row in rows:
        value = derivation.of(row)
        judge = control_for(row, controls, window) if value.drift else None
        if judge is None or judge.judge.id != control.id:
            continue
        was = "improvement" if float(row.score) > 1 else "regression"
        earlier = control_for(row, before, window)
        if earlier is not None and within_drift(
            was, row.score, row.score_ci, floor_reach(earlier, store.settings)
        ):
            continue  # marginal by the earlier control already
        interval = f" [{row.score_ci[0]:.4f}, {row.score_ci[1]:.4f}]" if row.score_ci else ""
        named.append(f"{row.id} ({was} {float(row.score):.4f}{interval})")
        reason = value.drift
    if not named:
        return None
    shown = _shown(named)
    drift = reason.split("'s ", 1)[-1].split(": an interval", 1)[0]
    return (
        f"control {control.id}: {len(named)} step(s) recorded on its env are within its "
        f"{drift}, marginal now (an interval covers the noise of one run, not the drift "
        f"between runs): {shown}"
    )


def turned_back(
    store: Store, control: KernelExperiment, before: dict[str, dict[str, list[Any]]]
) -> str | None:
    """``control N: 1 step(s) recorded on its env are no longer within a control's drift
    (6b.. aged out of the 5 newest): improvement now: A (1.0500)``; None when it
    promotes none. ``before``: the controls before it was recorded
    (:func:`kexp.core.campaign.env_controls`): a step they judged ``marginal`` by their
    drift that the newest controls, ``control`` among them, no longer do."""
    found = store.found()
    rows = _on_its_env(found.rows, control)
    if not rows:
        return None
    derivation = derive_for(found.rows, rows, store.settings)
    window = store.settings.control_drift_window
    named: list[str] = []
    aged: list[str] = []
    for row in rows:
        value = derivation.of(row)
        if value.drift or not may_meet_control(value) or judged_over_parent(row):
            continue  # still judged by a control's drift, or no change to judge
        earlier = control_for(row, before, window)
        if earlier is None or not within_drift(
            value.outcome, row.score, row.score_ci, floor_reach(earlier, store.settings)
        ):
            continue  # the controls before it did not find it within their drift either
        named.append(f"{row.id} ({value.outcome} {float(row.score):.4f})")
        if earlier.judge.id not in aged:
            aged.append(earlier.judge.id)
    if not named:
        return None
    shown = _shown(named)
    return (
        f"control {control.id}: {len(named)} step(s) recorded on its env are no longer "
        f"within a control's drift ({', '.join(aged)} aged out of the {window} newest), "
        f"judged by their own numbers now: {shown}"
    )


def _shown(named: list[str]) -> str:
    """The steps ``named``, the first :data:`NAMED_STEPS` of them and how many more."""
    more = len(named) - NAMED_STEPS
    return ", ".join(named[:NAMED_STEPS]) + (f" and {more} more" if more > 0 else "")


def control_notes(
    store: Store, control: KernelExperiment, before: dict[str, dict[str, list[Any]]]
) -> list[str]:
    """What ``control``, just recorded, says of the steps of its env:
    :func:`turned_marginal` and :func:`turned_back`, those that say something."""
    said = (turned_marginal(store, control, before), turned_back(store, control, before))
    return [note for note in said if note is not None]


def _on_its_env(rows: Sequence[Any], control: KernelExperiment) -> list[Any]:
    """The ``rows`` but ``control`` recorded on its env, in any spelling (:func:`canonical`)."""
    env = canonical("env", control.env)
    return [row for row in rows if canonical("env", row.env) == env and row.id != control.id]
