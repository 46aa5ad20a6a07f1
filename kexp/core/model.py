"""The experiment record: :class:`KernelExperiment` and its derived ``outcome``."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from kexp.core import ids
from kexp.core.campaign import derive_alone
from kexp.core.cumulative import Derived
from kexp.core.fields import ALL_FIELDS as ALL_FIELDS
from kexp.core.fields import BODY_FIELDS as BODY_FIELDS
from kexp.core.fields import FRONT_MATTER_FIELDS as FRONT_MATTER_FIELDS
from kexp.core.fields import LEGACY_FIELDS as LEGACY_FIELDS
from kexp.core.fields import OPTIONAL_FIELDS as OPTIONAL_FIELDS
from kexp.core.fields import SECTION_HEADINGS as SECTION_HEADINGS
from kexp.core.outcome import MEASURED_AGAINST as MEASURED_AGAINST
from kexp.core.outcome import PENDING_STATUSES as PENDING_STATUSES
from kexp.core.outcome import is_control, judge
from kexp.core.settings import DEFAULT_SETTINGS, Settings

#: An experiment's status (the predecessor's ``Status``).
Status = Literal["new", "running", "done", "failed", "timeout"]
STATUSES: tuple[str, ...] = get_args(Status)
OUTCOMES = (
    "pending",
    "buggy",
    "failed",
    "interference",
    "regression",
    "marginal",
    "improvement",
    "control",
)

#: The protocol keys (``protocol`` field): how the timings were measured.
PROTOCOL_KEYS = (
    "timer",
    "synchronized",
    "warmup",
    "repetitions",
    "l2_flushed",
    "clocks_locked",
    "device",
)


def creation_time(now: float | None = None) -> str:
    """The current time (or ``now``, seconds since the epoch) as the predecessor wrote
    ``created_at``: ISO 8601 UTC with microseconds and a ``Z``
    (``2026-11-29T15:52:36.123456Z``), from :func:`kexp.core.ids.current_time`."""
    moment = ids.current_time() if now is None else now
    return dt.datetime.fromtimestamp(moment, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: The default of ``id`` and ``created_at``: "make one when the object is built" (a
#: string object of its own, told apart by identity, never stored).
_UNSET = "".join(["<", "unset", ">"])


class Origin(NamedTuple):
    """What the store knows about an experiment it handed out; never stored, and not
    among the dataclass fields (so ``dataclasses.asdict`` of an experiment is plain
    data). Set by :func:`attach` only."""

    #: The file the experiment was read from or written to (None until stored).
    path: Path | None = None
    #: The thresholds ``outcome`` is derived with: the settings of its store.
    settings: Settings = DEFAULT_SETTINGS
    #: Whether it combines others and scores below the best of them (derived).
    interference: bool = False
    #: Everything derived of it from the whole store (:func:`kexp.core.campaign.derive`),
    #: or how to derive it when first asked for (what a write hands back); None for an
    #: experiment no store handed out.
    derived: Derived | Callable[[], Derived] | None = None
    #: Where it was found, by a store reading refs (a :class:`kexp.storage.rows.Sighting`).
    where: Any = None


_NO_ORIGIN = Origin()


@dataclasses.dataclass
class KernelExperiment:
    """One kernel optimization iteration: what was tried, how fast it was, and why.

    The fields are the predecessor's, in its order (so its positional calls keep
    working), then kexp's additions (``tags``, ``author``, ``combines``, ``results``,
    ``score_ci``, ``protocol``, ``samples``) and what a file holds besides the fields.
    ``id`` (a fresh one: the creation time in 8 hex, then 8 random hex) and
    ``created_at`` (UTC now, with microseconds) are made when the object is built, so
    ``exp.id`` is known before it is stored; an empty ``id``/``created_at`` is filled
    in when it is created. Every other text field defaults to ``""``.

    ``path``, ``settings``, ``interference`` and the values derived from the whole
    store (``cumulative_score``, ``cumulative_ci``, ``cumulative_reason``: see
    :mod:`kexp.core.campaign`) are read-only properties, not fields: the store sets them
    (:func:`attach`) when it hands an experiment out.
    """

    score: float = 0.0
    raw_result: str = ""
    dtype_sig: str = ""
    env: str = ""
    is_buggy: bool = False
    error_message: str = ""
    change_summary: str = ""
    detailed_description: str = ""
    code_change: str = ""
    base_commit: str = ""
    operator_sig: str = ""
    profiling_info: str = ""
    status: str = "new"
    id: str = dataclasses.field(default=_UNSET)
    pid: str = ""
    created_at: str = dataclasses.field(default=_UNSET)
    tags: list[str] = dataclasses.field(default_factory=list)
    author: str = ""
    combines: list[str] = dataclasses.field(default_factory=list)
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: The 95 % interval ``[low, high]`` of ``score`` when it was computed from samples
    #: (empty otherwise): outcomes then respect the noise.
    score_ci: list[float] = dataclasses.field(default_factory=list)
    #: How the timings were measured (keys of :data:`PROTOCOL_KEYS`; empty: unknown).
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: What ``score`` is a speedup over: ``parent`` (the parent's code) or
    #: ``reference`` (the operator's original code); empty: not said (a root's parent
    #: is the reference; a child's counts as ``parent`` and validation warns).
    measured_against: str = ""
    #: The ``## Samples`` section: raw timings per round (see :mod:`kexp.format.samples`).
    samples: str = ""
    #: Front-matter keys kexp does not know, kept as read (validation warns on them).
    extra_fields: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    #: Text before the first ``## `` section, kept as read.
    preamble: str = dataclasses.field(default="", repr=False)
    #: ``## `` sections kexp does not know, as (heading, text), kept as read.
    extra_sections: list[tuple[str, str]] = dataclasses.field(default_factory=list, repr=False)

    #: Not a field (no annotation): replaced, never changed, by :func:`attach`.
    _origin = _NO_ORIGIN

    def __post_init__(self) -> None:
        # A fresh id and created_at read one moment of the clock: at a month's (or a
        # year's) last instant they still name the same month (the file's folder).
        if self.id is _UNSET or self.created_at is _UNSET:
            now = ids.current_time()
            if self.id is _UNSET:
                self.id = ids.new_id(now)
            if self.created_at is _UNSET:
                self.created_at = creation_time(now)

    @property
    def path(self) -> Path | None:
        """The file this experiment was read from or written to (None until stored)."""
        return self._origin.path

    @property
    def settings(self) -> Settings:
        """The settings of the store it came from (the defaults otherwise)."""
        return self._origin.settings

    @property
    def interference(self) -> bool:
        """Whether it combines others and scores below the best of them (derived by
        the store; False for an experiment no store handed out)."""
        return self._derived_origin().interference

    @property
    def where(self) -> Any:
        """Where a store reading refs found it (a :class:`kexp.storage.rows.Sighting`: the refs
        holding this version and those holding older ones); None otherwise."""
        return self._origin.where

    @property
    def outcome(self) -> str:
        """What this experiment taught, derived with its store's thresholds: as the
        store derived it (a step measured against the reference is judged over its
        parent too, :func:`kexp.core.outcome.judged_over_parent`); for an experiment no
        store handed out, what it alone tells (:func:`outcome_of`)."""
        return self.derived.outcome

    @property
    def derived(self) -> Derived:
        """What the store derived of it (:mod:`kexp.core.campaign`); for an experiment no
        store handed out, what it alone tells (a step over a parent has no cumulative
        score: the parent was not read)."""
        derived = self._derived_origin().derived
        assert not callable(derived)
        return derived or derive_alone(self, self.settings)

    def __getstate__(self) -> dict[str, Any]:
        """What pickling (and copying) keeps: the fields and the origin, with derived
        values left for when first asked for made now (their function holds a store)."""
        self._derived_origin()
        return self.__dict__

    def _derived_origin(self) -> Origin:
        """:attr:`_origin`, its derived values made now if they were left for when first
        asked for."""
        origin = self._origin
        if callable(origin.derived):
            derived = origin.derived()
            origin = self._origin = origin._replace(
                derived=derived, interference=derived.interference
            )
        return origin

    @property
    def derived_by_store(self) -> bool:
        """Whether a store derived :attr:`derived` from all its experiments (False:
        what this experiment alone tells)."""
        return self._origin.derived is not None

    @property
    def cumulative_score(self) -> float | None:
        """The speedup over the operator's reference code: the product of the steps
        along the ``pid`` chain back to the nearest reference measurement (None when
        it cannot be known: :attr:`cumulative_reason` says why)."""
        return self.derived.cumulative_score

    @property
    def cumulative_ci(self) -> tuple[float, float] | None:
        """The 95 % interval of :attr:`cumulative_score` (None without one)."""
        return self.derived.cumulative_ci

    @property
    def cumulative_reason(self) -> str:
        """Why there is no :attr:`cumulative_score` ("" when there is one)."""
        return self.derived.cumulative_reason

    @property
    def is_control(self) -> bool:
        """Tagged ``control``: an A/A run (the noise floor), never ranked."""
        return is_control(self)

    def to_dict(self, *, include_derived: bool = False) -> dict[str, Any]:
        """The stored fields as a dict in the dataclass's field order, as
        ``dataclasses.asdict`` has them (the predecessor's 16 first: COMPAT.md), plus the
        derived ``outcome``, ``cumulative_score``, ``cumulative_ci``,
        ``cumulative_reason`` and ``path``."""
        data: dict[str, Any] = {name: _copy(getattr(self, name)) for name in _DICT_FIELDS}
        if include_derived:
            derived = self.derived
            data["outcome"] = self.outcome
            data["cumulative_score"] = derived.cumulative_score
            data["cumulative_ci"] = (
                None if derived.cumulative_ci is None else list(derived.cumulative_ci)
            )
            data["cumulative_reason"] = derived.cumulative_reason
            data["path"] = str(self.path) if self.path else None
        return data

    def to_legacy_dict(self) -> dict[str, Any]:
        """The record in the predecessor's JSON shape (its keys only)."""
        return {name: _copy(getattr(self, name)) for name in LEGACY_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelExperiment:
        """Build an experiment from a dict of fields; unknown keys go to ``extra_fields``."""
        known = _INIT_FIELDS
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known and k not in DERIVED}
        exp = cls(**kwargs)
        exp.extra_fields.update(extra)
        return exp


#: The stored fields (:data:`ALL_FIELDS`) in the dataclass's order: the keys of
#: :meth:`KernelExperiment.to_dict`.
_DICT_FIELDS = tuple(f.name for f in dataclasses.fields(KernelExperiment) if f.name in ALL_FIELDS)
assert set(_DICT_FIELDS) == set(ALL_FIELDS), "every stored field is a dataclass field"

#: What :meth:`KernelExperiment.to_dict` adds with ``include_derived`` (and the store's
#: runtime state), and what a record of ``--json`` derives besides (``outcome_reason``):
#: never a field, never stored, ignored by ``from_dict``.
DERIVED = frozenset(
    {
        "outcome",
        "path",
        "interference",
        "settings",
        "derived",
        "cumulative_score",
        "cumulative_ci",
        "cumulative_reason",
        "outcome_reason",
    }
)
_INIT_FIELDS = frozenset(f.name for f in dataclasses.fields(KernelExperiment) if f.init)
_KEEP: Any = object()


def attach(
    exp: KernelExperiment,
    settings: Settings | None = None,
    *,
    path: Path | None = _KEEP,
    interference: bool | None = None,
    derived: Derived | Callable[[], Derived] | None = None,
    where: Any = _KEEP,
) -> KernelExperiment:
    """Set what the store knows about ``exp`` (its file, its store's settings, what is
    derived of it from the whole store, :func:`kexp.core.campaign.derive`, or a function
    deriving it when first asked for; ``interference`` alone where nothing else was
    derived; where a store reading refs found it): the one place that state is set. What
    is not given stays as it was. Returns ``exp``."""
    old = exp._origin
    if derived is not None and not callable(derived):
        interference = derived.interference
    exp._origin = Origin(
        old.path if path is _KEEP else path,
        old.settings if settings is None else settings,
        old.interference if interference is None else interference,
        old.derived if derived is None else derived,
        old.where if where is _KEEP else where,
    )
    return exp


def experiment_from_fields(fields: dict[str, Any], path: Path | None = None) -> KernelExperiment:
    """An experiment from front-matter ``fields`` as read from a file (bodies left empty).

    Known fields become attributes (an optional field that is absent or null keeps its
    default); unknown keys go to ``extra_fields``.
    """
    # A file without an id or created_at gives "" (never a made-up one).
    data: dict[str, Any] = {"id": "", "created_at": ""}
    extra: dict[str, Any] = {}
    for key, value in fields.items():
        if key in _FRONT_MATTER_SET:
            if value is not None or key not in OPTIONAL_FIELDS:
                data[key] = value
        else:
            extra[key] = value
    exp = KernelExperiment(**data)
    exp.extra_fields = extra
    if path is not None:
        attach(exp, path=path)
    return exp


_FRONT_MATTER_SET = frozenset(FRONT_MATTER_FIELDS)


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [dict(v) if isinstance(v, dict) else v for v in value]
    return value


def outcome_of(exp: KernelExperiment, settings: Settings = DEFAULT_SETTINGS) -> str:
    """Derive the outcome: control (tagged ``control``: an A/A run), pending, buggy,
    failed, interference, regression, marginal, improvement
    (:func:`kexp.core.outcome.judge`).

    With a ``score_ci``, ``improvement`` needs its low end above 1 and ``regression``
    its high end below 1 (besides the thresholds); otherwise the thresholds alone
    decide. ``exp`` may be a cached row: any object with these attributes.
    """
    return judge(
        exp.status,
        exp.is_buggy,
        exp.interference,
        exp.score,
        getattr(exp, "score_ci", None),
        settings,
        control=is_control(exp),
    )
