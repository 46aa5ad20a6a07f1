"""Tunable settings: thresholds and limits live here, never as literals in code."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Settings:
    """Thresholds and limits used by the store, queries and validation.

    Pass a modified copy to :class:`kexp.Store` (``Store(root, settings=...)``) to
    change them, e.g. ``dataclasses.replace(DEFAULT_SETTINGS, regression_below=0.98)``.
    """

    #: A score below this is a ``regression``.
    regression_below: float = 0.99
    #: A score above this is an ``improvement``; in between is ``marginal``.
    improvement_above: float = 1.01
    #: Shortest id prefix accepted for lookups.
    min_id_prefix: int = 4
    #: Longest ``change_summary`` accepted.
    max_summary_chars: int = 80
    #: Files larger than this are refused instead of read whole.
    max_file_bytes: int = 4 * 1024 * 1024
    #: An update reads a file over ``max_file_bytes`` up to this size (larger ones are
    #: refused unread), so that it can make the file small enough again; what it
    #: writes must fit ``max_file_bytes``.
    max_repair_file_bytes: int = 64 * 1024 * 1024
    #: What a user gives kexp to read whole (timings, a document, a description, a diff,
    #: standard input) is refused over this size, before it fills memory
    #: (:func:`kexp.inputs.read_input`).
    max_input_bytes: int = 64 * 1024 * 1024
    #: The predecessor's database ``kexp import`` reads is refused over this size (368 MB
    #: at 100,000 records).
    max_import_bytes: int = 2 * 1024 * 1024 * 1024
    #: Relative disagreement between ``score`` and the geometric mean of ``results``
    #: above which validation warns.
    score_tolerance: float = 0.005
    #: Seconds a writer waits for another writer's lock on the same experiment.
    lock_timeout_s: float = 30.0
    #: A writer's temporary file (``.<name>.<random>.tmp``) older than this many seconds
    #: was left by a killed writer (a live one keeps it for milliseconds): ``kexp fmt``
    #: deletes it.
    stale_temporary_s: float = 3600.0
    #: A query cache of another kexp version (``.kexp/index-<hash>.sqlite``, tens of MB
    #: for a large store) not written for this many days is removed when this version
    #: writes its own; that version rebuilds it if it is still used.
    unused_cache_days: float = 14.0
    #: Default number of experiments ``top_experiments`` returns.
    top_default: int = 20
    #: A score above this speedup is implausible enough to be flagged
    #: "suspect: verify correctness" (a kernel that skipped work, an unsynchronised timer).
    suspect_score_above: float = 3.0
    #: A measured time (baseline or candidate, in microseconds) below this is "near zero":
    #: below GPU timer resolution, so the measurement is flagged as suspect.
    suspect_time_below_us: float = 0.5
    #: A kernel shorter than this (microseconds) timed with a host wall clock without
    #: device synchronisation (``protocol``) is suspect: the clock may read the launch.
    suspect_wall_clock_below_us: float = 100.0
    #: Two code changes whose shingles (changed lines, variables renamed) are at least
    #: this similar (Jaccard) are near-duplicates: a create warns that it was tried.
    near_duplicate_similarity: float = 0.5


DEFAULT_SETTINGS = Settings()
