"""Experiment ids: creation, shape checks, prefixes. No path is built from an unchecked id."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable

from kexp.core.errors import AmbiguousIdError, ExperimentNotFoundError, InvalidIdError

ID_LENGTH = 16
#: How many characters of an id listings print, and the prefix length to give: unique
#: in practice. An id begins with its creation time in seconds (8 hex), so ids made
#: within about 18 hours share their first 4 characters, within 68 minutes 5, within
#: 4 minutes 6, within 16 seconds 7; 10 characters are shared only by two ids made in
#: the same second whose first 2 random characters match (1 pair in 256).
SHOWN_LENGTH = 10
_ID_RE = re.compile(r"[0-9a-f]{16}")
_HEX_RE = re.compile(r"[0-9a-f]+")


def current_time() -> float:
    """Now, in seconds since the epoch: the one clock new ids and ``created_at`` are
    read from (tests set it to a chosen moment, such as a year's last second)."""
    return time.time()


def new_id(now: float | None = None) -> str:
    """A new id: creation time in seconds (8 hex, so ids sort by time) + 8 random hex."""
    seconds = int(current_time() if now is None else now) & 0xFFFFFFFF
    import secrets  # here: importing it costs every read-only command ~5 ms

    return f"{seconds:08x}{secrets.token_hex(4)}"


def is_valid_id(value: object) -> bool:
    """Whether ``value`` is a full experiment id (16 lowercase hex)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def is_prefix(value: object, min_length: int = 4) -> bool:
    """Whether ``value`` is a shortened id: ``min_length`` to 15 hex characters."""
    return (
        isinstance(value, str)
        and min_length <= len(value) < ID_LENGTH
        and _HEX_RE.fullmatch(value.lower()) is not None
    )


def check_id(value: object) -> str:
    """Return ``value`` if it is a full id, else raise :class:`InvalidIdError`."""
    if not is_valid_id(value):
        raise InvalidIdError(
            f"{value!r} is not an experiment id: expected 16 lowercase hex characters"
        )
    assert isinstance(value, str)
    return value


def check_prefix(value: object, min_length: int = 4) -> str:
    """Return ``value`` lowercased if it is a usable id prefix, else raise.

    A prefix is 4 to 16 hex characters (``min_length`` is a setting).
    """
    if not isinstance(value, str):
        raise InvalidIdError(f"{value!r} is not an experiment id or id prefix")
    prefix = value.strip().lower()
    if not _HEX_RE.fullmatch(prefix) or len(prefix) > ID_LENGTH:
        raise InvalidIdError(
            f"{value!r} is not an experiment id or id prefix: use hex digits 0-9a-f, "
            f"at most {ID_LENGTH}"
        )
    if len(prefix) < min_length:
        raise InvalidIdError(
            f"id prefix {value!r} is too short: give at least {min_length} characters; "
            f"{PREFIX_ADVICE}"
        )
    return prefix


def distinct_length(shown: Iterable[str], every: Iterable[str], minimum: int = SHOWN_LENGTH) -> int:
    """How many characters of an id to print ``shown`` at: at least ``minimum``, more
    where one of them shares its first ``minimum`` with another id of ``every`` (or of
    ``shown``), so that each printed prefix names one experiment."""
    wanted = set(shown)
    heads = {exp_id[:minimum] for exp_id in wanted}
    if not heads:
        return minimum
    near = sorted({exp_id for exp_id in every if exp_id[:minimum] in heads} | wanted)
    length = minimum
    for before, after in itertools.pairwise(near):
        if before in wanted or after in wanted:
            pairs = enumerate(zip(before, after, strict=False))
            same = next((at for at, (a, b) in pairs if a != b), min(len(before), len(after)))
            length = max(length, same + 1)
    return min(length, ID_LENGTH)


#: What to do about a prefix too short to be unique (ends the errors that say so).
PREFIX_ADVICE = (
    "ids begin with their creation time, so ids recorded close together share their "
    f"first characters: give {SHOWN_LENGTH} (as listings print them) or the full id"
)


def the_one(prefix: str, known: Iterable[str], where: str) -> str:
    """The one id of ``known`` starting with ``prefix``: :class:`ExperimentNotFoundError`
    (saying ``where`` it looked) when none does, :class:`AmbiguousIdError` when several."""
    candidates = sorted(exp_id for exp_id in known if exp_id.startswith(prefix))
    if not candidates:
        raise ExperimentNotFoundError(
            f"no experiment with id {prefix}{'' if len(prefix) == ID_LENGTH else '...'} in {where}"
        )
    if len(candidates) > 1:
        if len(prefix) < SHOWN_LENGTH:
            raise AmbiguousIdError(prefix, candidates, PREFIX_ADVICE)
        apart = 1 + max(
            next((at for at, (a, b) in enumerate(zip(x, y, strict=True)) if a != b), ID_LENGTH)
            for x, y in itertools.pairwise(candidates)
        )
        raise AmbiguousIdError(
            prefix, candidates, f"give {apart} characters (they tell these apart) or the full id"
        )
    return candidates[0]
