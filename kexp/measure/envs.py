"""The machine a new experiment was measured on, judged when it is recorded.

A campaign is an operator × dtype × env (stats, tree and review tell them apart by the
``env`` text; context reads kexp's spelling of it), so an ``env`` that keeps a record
out of its campaign is warned of (:class:`~kexp.core.errors.EnvWarning`), the record
written all the same: a root's empty one, as its empty operator_sig or dtype_sig (it
belongs to no campaign; ``kexp validate`` warns of it too: ``campaign-missing``), one
spelt otherwise than a recorded env (``h100 sxm cuda12.4`` beside ``H100 SXM, CUDA
12.4``: a campaign of its own), or naming its GPU as a tool prints it where the store
names that GPU's model (nvidia-smi's ``NVIDIA H100 80GB HBM3`` beside ``H100 SXM5 80GB,
CUDA 12.4``: :mod:`kexp.core.gpunames`), and a
step measured on another machine than its parent and over its code (its cumulative
score multiplies scores of two machines; ``kexp validate`` warns of it too:
``env-differs-from-parent``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kexp.core.advice import CAMPAIGN_OPTIONS, CORRECT_FIELD
from kexp.core.errors import EnvWarning, KexpError
from kexp.core.gpunames import tool_names_in
from kexp.format.rules import (
    CAMPAIGN_FIELDS,
    campaign_missing,
    folded_env,
    listed,
    spelt_otherwise_effect,
)

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store

__all__ = ["env_warnings", "parents_env"]


def parents_env(store: Store, fields: Mapping[str, Any]) -> str | None:
    """The ``env`` of the experiment ``fields``' pid names (None: no parent, or not one
    the store holds: validation says what is wrong with the pid)."""
    pid = fields.get("pid")
    if not isinstance(pid, str) or not pid.strip():
        return None
    try:
        return store.get_experiment(pid.strip()).env
    except KexpError:
        return None


def env_warnings(exp: KernelExperiment, envs: list[str], parents: str | None) -> list[str]:
    """What is wrong with the campaign of ``exp``, just recorded: a root's empty
    operator_sig, dtype_sig or env (:func:`kexp.format.rules.campaign_missing`), an env
    spelt otherwise than one of ``envs`` (those recorded before it), another than
    ``parents`` (its parent's env; None: no parent). Each is warned of
    (:class:`EnvWarning`) and returned."""
    said: list[str] = []
    env = exp.env.strip()
    correct = CORRECT_FIELD.say(id=exp.id, field="env")
    # a root's only (a step is given its parent's): kexp validate warns of it too
    missing = campaign_missing(
        {"pid": exp.pid, **{name: getattr(exp, name) for name in CAMPAIGN_FIELDS}}
    )
    if missing:
        first = CORRECT_FIELD.say(id=exp.id, field=missing[0])
        said.append(
            f"experiment {exp.id} has an empty {listed(missing)}: it is in no operator's "
            f"campaign (top, stats and context group by them); give them when recording "
            f"({CAMPAIGN_OPTIONS}), or set them now: {first}"
        )
    if env and env not in envs:
        said.extend(_spelt_otherwise(exp.id, env, envs, correct))
    if parents is not None and env != parents.strip() and exp.measured_against != "reference":
        pid = CORRECT_FIELD.say(id=exp.id, field="pid")
        # The parent's machine spelt otherwise (NVIDIA H100-SXM5 for H100 SXM5): say so
        # first, as writing its spelling is all there is to do then.
        spelt = (
            f", spelt otherwise: if it is that machine, write that spelling ({correct}); if not, "
            if folded_env(env) == folded_env(parents)
            else ": "
        )
        said.append(
            f"experiment {exp.id} was measured on {env!r}, its parent {exp.pid} on "
            f"{parents.strip()!r}{spelt}its cumulative score multiplies scores of two "
            f"machines; measure the parent's code on this machine and make that record "
            f"the parent ({pid}), or start from the reference with an empty pid "
            "(kexp validate warns of it)"
        )
    for message in said:
        warnings.warn(message, EnvWarning, stacklevel=3)
    return said


def _spelt_otherwise(exp_id: str, env: str, envs: list[str], correct: str) -> list[str]:
    """What to say of ``env``, recorded nowhere before, where ``envs`` (those recorded)
    hold its machine spelt otherwise: the same env in other words (``h100 sxm cuda12.4``
    for ``H100 SXM, CUDA 12.4``; ``NVIDIA H100 80GB HBM3, CUDA 12.4``, nvidia-smi's name,
    for ``H100 SXM5 80GB, CUDA 12.4``), or, where ``env`` names its GPU as a tool prints
    it, the envs that name that GPU's model (``NVIDIA H100 80GB HBM3`` beside ``H100 SXM5
    80GB, CUDA 12.4``)."""
    mine = folded_env(env)
    near = sorted(e for e in envs if e.strip() and folded_env(e) == mine)
    tools = tool_names_in(env)
    named = "; ".join(f"{tool} names the {model} {name!r}" for name, model, tool in tools)
    if near:
        why = f" ({named})" if tools else ""
        return [
            f"experiment {exp_id}: env {env!r} is recorded nowhere else, but {near[0]!r} "
            f"is, spelt otherwise{why}: {spelt_otherwise_effect(env, near[0])}; if it is that "
            f"machine, write that spelling: {correct}"
        ]
    models = {folded_env(model) for _, model, _ in tools}
    naming = sorted(
        {e for e in envs if e.strip() and any(m in folded_env(e) for m in models)},
        key=lambda e: (-envs.count(e), e),
    )
    if not naming:
        return []
    more = f" (and {len(naming) - 1} more env(s) naming it)" if len(naming) > 1 else ""
    return [
        f"experiment {exp_id}: env {env!r} names the GPU as a tool prints it ({named}); "
        f"this store records that GPU as {naming[0]!r}{more}: kexp stats, tree and "
        f"review count each env a campaign of its own; if it is that machine, write "
        f"that spelling: {correct}"
    ]
