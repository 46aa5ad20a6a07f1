"""kexp's exceptions and warnings: small classes under one base each, free of any CLI
framework (the bottom of the import graph: every module may import it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kexp.core.problems import Problem


class KexpError(Exception):
    """Base class of every error kexp raises on purpose; its text is for the user."""


class StoreNotFoundError(KexpError):
    """No store (a folder holding ``experiments/``) could be found."""


class InvalidIdError(KexpError, ValueError):
    """A string given as an experiment id (or prefix) is not one."""


class ExperimentNotFoundError(KexpError, KeyError):
    """No experiment has the given id or id prefix.

    Also a :class:`KeyError`, as the predecessor's ``update_experiment`` raised.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "experiment not found"


class ExperimentExistsError(KexpError, ValueError):
    """An experiment with the id being created is in the store already.

    Also a :class:`ValueError`, as the predecessor's ``create_experiment`` raised.
    """


class AmbiguousIdError(KexpError, LookupError):
    """An id prefix matches more than one experiment.

    ``advice`` (how long a prefix to give) ends the message; ``candidates`` holds every
    match, the message the first :data:`SHOWN_CANDIDATES`.
    """

    def __init__(
        self, prefix: str, candidates: Sequence[str], advice: str = "give more characters"
    ) -> None:
        self.prefix = prefix
        self.candidates = list(candidates)
        listing = ", ".join(self.candidates[:SHOWN_CANDIDATES])
        more = len(self.candidates) - SHOWN_CANDIDATES
        if more > 0:
            listing += f" and {more} more"
        super().__init__(
            f"id prefix {prefix!r} is ambiguous: it matches {len(self.candidates)} "
            f"experiments ({listing}); {advice}"
        )


#: How many of an ambiguous prefix's matches its error message names.
SHOWN_CANDIDATES = 10


class ValidationError(KexpError, ValueError):
    """An experiment (or file) failed validation; ``problems`` lists every problem."""

    def __init__(self, message: str, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(message)

    def __str__(self) -> str:
        lines = [str(self.args[0])]
        lines.extend(p.format() for p in self.problems if p.severity == "error")
        return "\n".join(lines)


class MeasurementError(KexpError, ValueError):
    """Timings cannot be read or paired; the message says which file and configuration."""


class BudgetTooSmallError(KexpError):
    """A context packet's budget of tokens is smaller than its heading alone takes;
    ``smallest`` is the least budget that fits. The message names the budget as the
    command takes it (``--budget``; :data:`kexp.core.advice.BUDGET`)."""

    def __init__(self, budget: int, heading: int, smallest: int, per_token: int) -> None:
        from kexp.core.advice import BUDGET  # lazy: errors.py imports nothing at the bottom

        self.budget = budget
        self.heading = heading
        self.smallest = smallest
        self.per_token = per_token
        super().__init__(
            f"a budget of {budget} tokens is too small: the packet's heading alone takes "
            f"{heading} (characters / {per_token}); {BUDGET.say(n=smallest)} (each entry "
            "kept takes more)"
        )


class DeleteRefusedError(KexpError):
    """A delete refused: other experiments name this one as their ``pid`` or in their
    ``combines`` (``force=True`` deletes it anyway)."""


class CacheFolderError(KexpError, OSError):
    """The store's cache folder ``.kexp/`` cannot be made (a store one may read but not
    write). An :class:`OSError` too: reads, which need no cache on disk, go on without
    it; a write, which takes its locks there, stops with this message."""


class LockTimeoutError(KexpError):
    """Another writer held an experiment's lock for too long."""


class GitError(KexpError):
    """A git operation failed; the message says what to do."""


class NoCommitsError(GitError):
    """A git repository has no commit yet (there is no ``HEAD`` to take)."""


class SyncConflictError(GitError):
    """``kexp sync`` met a real conflict (the same file changed on both sides, or a file
    where the other side has a folder); nothing was changed. ``paths`` names the
    conflicting files, ``conflicts`` git's description of each (``CONFLICT (...): ...``)."""

    def __init__(self, message: str, paths: Sequence[str], conflicts: Sequence[str] = ()) -> None:
        self.paths = list(paths)
        self.conflicts = list(conflicts)
        super().__init__(message)


# --- warnings ------------------------------------------------------------------------


class InvalidExperimentWarning(UserWarning):
    """A query skipped a file that is not a valid experiment."""


class DuplicateIdWarning(UserWarning):
    """A read found an id that several experiment files hold (a copied file, or two
    branches that made the same id): the reads list each of them."""


class KexpWarning(UserWarning):
    """Something worth knowing happened during a write (e.g. a dirty working tree)."""


class UncommittedBaseWarning(KexpWarning):
    """``base_commit`` was filled from ``HEAD`` while the working tree had changes."""


class CodeRepoWarning(KexpWarning):
    """The code repository could not be used to fill in ``base_commit``/``author``."""


class RepeatedChangeWarning(KexpWarning):
    """A new experiment's code change was already tried in an earlier experiment."""


class NearDuplicateWarning(RepeatedChangeWarning):
    """A new experiment's code change is a near-duplicate of an earlier one's."""


class RevertWarning(RepeatedChangeWarning):
    """A new experiment's code change undoes its parent's (a revert): said instead of the
    near-duplicates it resembles (the code before the parent)."""


class RemeasureWarning(RepeatedChangeWarning):
    """A new experiment repeats an earlier one's code change, base commit (or one of the
    same code: they differ only in the store's folder) and env: it should be a new round
    of that experiment (``kexp remeasure``)."""


class RootWarning(KexpWarning):
    """A new root (no ``pid``) on a kernel, dtype and env that already has a campaign:
    it may build on that campaign's best tip, its parent forgotten."""


class MeasuredAgainstWarning(KexpWarning):
    """A step recorded on a parent does not say what its score is a speedup over
    (``measured_against``): it counts as a step over the parent, and validation warns."""


class StaleMeasurementWarning(KexpWarning):
    """A corrected score no longer agrees with the measurement recorded with it."""


class ControlWarning(KexpWarning):
    """A control (an A/A run: the same code on both sides) measured what the same code
    cannot: an interval that excludes 1, or a noise floor far wider than before."""


class RoundsWarning(KexpWarning):
    """An experiment's rounds of measurement disagree beyond their intervals: one was
    disturbed, and the interval recorded holds them all."""


class TimingsWarning(KexpWarning):
    """A timings file was read, but it lacks what an interval needs (raw samples)."""


class SummaryWarning(KexpWarning):
    """A recorded experiment's ``change_summary`` states a speedup its score contradicts
    (``+12.5%`` beside 0.8956)."""


class NoMatchWarning(UserWarning):
    """A read's operator filter matches no experiment recorded (a typo, another name):
    its empty answer says nothing of that operator. A note of a read, naming the
    closest operators recorded (as :class:`InvalidExperimentWarning`, not a write's)."""


class EnvWarning(KexpWarning):
    """A recorded experiment's ``env`` keeps it out of the campaign it belongs to: empty,
    spelt otherwise than a recorded env, or another machine than its parent's."""


class SuspectMeasurementWarning(UserWarning):
    """A recorded experiment's measurements look too good (or too small) to be true."""


class SettingsFileError(KexpError):
    """A store's settings file (``kexp.toml``) cannot be used: the message names the file
    and line, and what to write."""


class InputError(KexpError, ValueError):
    """An input cannot be read: too large, endless, not a file, not UTF-8 text."""
