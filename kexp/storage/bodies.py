"""The body fields of experiments listed without them (``list_experiments(brief=True)``),
read from their files (found on a ref, or in a store at a revision: their contents) for
:meth:`kexp.storage.reader.StoreReader.with_bodies`."""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import TYPE_CHECKING

from kexp.core.errors import InvalidExperimentWarning
from kexp.core.model import KernelExperiment, attach
from kexp.format.fileformat import FileFormatError, parse
from kexp.format.reading import read_file

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from kexp.core.settings import Settings
    from kexp.storage.sources import FileSource


def read_bodies(
    batch: list[KernelExperiment], source: FileSource, settings: Settings, experiments_dir: Path
) -> Iterator[KernelExperiment]:
    """The experiments of ``batch`` with their body fields read (see
    :meth:`kexp.storage.reader.StoreReader.with_bodies`, which gives a few at a time)."""
    blobs: dict[int, bytes | None] = {}
    if source.revision is not None:  # a revision's files: its blobs, not the working tree's
        listed = [e for e in batch if e.path is not None]
        contents = source.contents([str(e.path) for e in listed], settings)
        for exp, (_, found) in zip(listed, contents, strict=True):
            blobs[id(exp)] = found if isinstance(found, bytes) else None
    elsewhere = [e for e in batch if e.where is not None and not e.where.local]
    if elsewhere:
        items = [(os.path.relpath(str(e.path), experiments_dir), e.where.key) for e in elsewhere]
        for exp, data in zip(elsewhere, source.bytes_found(items, settings), strict=True):
            blobs[id(exp)] = data
    for exp in batch:
        if exp.path is None:
            yield exp
            continue
        try:
            if id(exp) in blobs:
                data = blobs[id(exp)]
                if data is None:
                    raise OSError(f"the blob of {exp.id} cannot be read")
            else:
                data = read_file(exp.path, settings)
            doc = parse(data, exp.path, fast=True)
        except FileFormatError as exc:
            problem = exc.problem.message
        except OSError as exc:
            problem = exc.strerror or str(exc)
        else:
            if doc.fields.get("id") == exp.id:
                whole = dataclasses.replace(exp)
                for name, value in doc.body_values().items():
                    setattr(whole, name, value)
                whole.preamble = doc.preamble
                whole.extra_sections = [
                    (s.heading, s.text) for s in doc.sections if s.field is None
                ]
                yield attach(
                    whole, exp.settings, path=exp.path, derived=exp.derived, where=exp.where
                )
                continue
            problem = "it now holds another experiment"
        warnings.warn(
            f"could not read the text of {exp.path}: {problem}",
            InvalidExperimentWarning,
            stacklevel=3,
        )
        yield exp
