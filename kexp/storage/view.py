"""What the modules a store calls see of it: the :class:`StoreView` protocol.

:class:`kexp.storage.store.Store` calls a few modules for work that is not its own (its
history and changes, :mod:`kexp.storage.history`; the tried-before warning of a create,
:mod:`kexp.storage.retrieval` with :mod:`kexp.storage.dedupe` and :mod:`kexp.agents.lessons`). They
take the
store as a :class:`StoreView`, the part of its API they use, so that none of them
imports :mod:`kexp.storage.store`: imports run downwards, with no circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    from kexp.core.campaign import Derivation
    from kexp.core.errors import KexpError
    from kexp.core.model import KernelExperiment
    from kexp.core.settings import Settings
    from kexp.format.validate import CheckedFile
    from kexp.storage.cache import Cache
    from kexp.storage.rows import Row
    from kexp.storage.sources import FileSource, Found


class StoreView(Protocol):
    """The read API of a :class:`~kexp.storage.store.Store` (see its methods' documentation)."""

    root: Path
    code_repo: Path
    settings: Settings
    source: FileSource

    @property
    def experiments_dir(self) -> Path: ...

    @property
    def cache_dir(self) -> Path: ...

    @property
    def is_working_tree(self) -> bool: ...

    @property
    def commit(self) -> str | None: ...

    def paths(self) -> list[Path]: ...

    def check_file(self, path: Path | str) -> CheckedFile: ...

    def resolve_id(self, id_or_prefix: str) -> str: ...

    def not_found_here(self, id_or_prefix: str, error: KexpError) -> KexpError: ...

    def id_index(self, prefix: str = "") -> dict[str, list[Path]]: ...

    def list_experiments(
        self, *, strict: bool = False, brief: bool = False, **filters: Any
    ) -> list[KernelExperiment]: ...

    def with_bodies(
        self, experiments: Iterable[KernelExperiment]
    ) -> Iterator[KernelExperiment]: ...

    def get_experiment(self, exp_id: str) -> KernelExperiment: ...

    def derivation(self, *, strict: bool = False) -> Derivation: ...

    def found(self, *, strict: bool = False) -> Found: ...

    def control_rows(self) -> list[Row]: ...

    def history(self, exp_id: str, *, revision: str | None = None) -> list[Any]: ...

    def answered(self, question: Sequence[Any], make: Callable[[Found], Any]) -> Any: ...

    def note_unmatched(self, filters: Mapping[str, Any]) -> None: ...

    def open_cache(self) -> Cache: ...
