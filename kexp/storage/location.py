"""Where a store is, and making one: the folder holding ``experiments/``.

:func:`find_root` finds the default store (``$KEXP_ROOT``, else the nearest folder above
the working directory holding ``experiments/``); :func:`init_store` creates one
(``experiments/`` with a README written atomically, and the rule that keeps the cache
folder :data:`CACHE_DIR` out of git). The link rule is here too: kexp reads and writes a
store only through real folders (:func:`refuse_linked_store`,
:func:`refuse_links_in_cache`).
"""

from __future__ import annotations

import os
from pathlib import Path

from kexp.core.advice import ROOT
from kexp.core.errors import KexpError, StoreNotFoundError
from kexp.storage import atomic
from kexp.storage.sources import EXPERIMENTS_DIR

__all__ = ["CACHE_DIR", "find_root", "init_store", "refuse_linked_store", "refuse_links_in_cache"]

#: The store's git-ignored cache folder (locks, index), beside ``experiments/``.
CACHE_DIR = ".kexp"
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def find_root(start: Path | str | None = None) -> Path:
    """The default store: ``$KEXP_ROOT``, else the nearest ancestor holding ``experiments/``."""
    env = os.environ.get("KEXP_ROOT")
    if env:
        root = Path(env).expanduser()
        if not (root / EXPERIMENTS_DIR).is_dir():
            raise StoreNotFoundError(
                f"KEXP_ROOT is {env}, which has no {EXPERIMENTS_DIR}/ folder: create the store "
                f"with 'kexp init {env}', or unset KEXP_ROOT"
            )
        return root.resolve()
    try:
        here = Path(start or Path.cwd()).resolve()
    except FileNotFoundError:  # the working directory was removed (or cloned again)
        raise StoreNotFoundError(
            "the working directory is gone (removed, or removed and cloned again at its "
            "path): change to the store's folder again (os.chdir in Python), give the "
            "store's path, or set KEXP_ROOT"
        ) from None
    for folder in (here, *here.parents):
        if (folder / EXPERIMENTS_DIR).is_dir():
            return folder
    raise StoreNotFoundError(
        f"no kexp store found: looked for an {EXPERIMENTS_DIR}/ folder in {here} and every "
        "folder above it; create one with 'kexp init' (or 'mkdir experiments'), "
        "or set KEXP_ROOT to the folder that holds it"
    )


def init_store(root: Path | str) -> Path:
    """Create a store in ``root``: ``experiments/`` with a README, and the cache ignore rule.

    Idempotent: existing files are left as they are. The README is written atomically
    (:func:`kexp.storage.atomic.create`); nothing is written through a symbolic link (see
    :func:`refuse_linked_store`). Returns ``root``; :func:`init_store_made` also says
    what was made.
    """
    init_store_made(root)
    return Path(root)


def init_store_made(root: Path | str) -> list[str]:
    """:func:`init_store`, and what it made, relative to ``root`` (``experiments/``,
    ``experiments/README.md``, ``.gitignore``): nothing when the store was there."""
    root = Path(root)
    made: list[str] = []
    experiments = root / EXPERIMENTS_DIR
    refuse_linked_store(experiments)
    if not experiments.is_dir():
        experiments.mkdir(parents=True, exist_ok=True)
        made.append(f"{EXPERIMENTS_DIR}/")
    readme = experiments / "README.md"
    # Linked into place only if the name is free (a link there included): never
    # written through a link, never half-written.
    try:
        atomic.create(readme, _STORE_README)
        made.append(f"{EXPERIMENTS_DIR}/README.md")
    except FileExistsError:
        pass
    except OSError as exc:
        raise atomic.write_failure(readme, exc) from None
    gitignore = root / ".gitignore"
    if gitignore.is_symlink():
        raise KexpError(
            f"{gitignore} is a symbolic link: kexp never writes through one; replace it "
            f"with a file, or add the line '{CACHE_DIR}/' to the file it points to yourself"
        )
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if not any(line.strip().strip("/") == CACHE_DIR for line in existing.splitlines()):
        separator = "" if not existing or existing.endswith("\n") else "\n"
        fd = os.open(gitignore, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_FOLLOW, 0o644)
        with open(fd, "a", encoding="utf-8") as handle:
            handle.write(
                f"{separator}# kexp's cache (locks, index): never committed\n{CACHE_DIR}/\n"
            )
        made.append(".gitignore")
    return made


def refuse_linked_store(experiments: Path) -> None:
    """Refuse an ``experiments/`` folder that is a symbolic link (the rule: kexp reads and
    writes a store only through real folders, never through a link, wherever it
    points, so that a cloned repository can make kexp read or write nothing outside
    it)."""
    if experiments.is_symlink():
        raise KexpError(
            f"{experiments} is a symbolic link (to {os.readlink(experiments)}): kexp reads and "
            f"writes only a real {EXPERIMENTS_DIR}/ folder, never through a link; replace the "
            f"link with the folder itself, or {ROOT}"
        )


def refuse_links_in_cache(folder: Path) -> None:
    """Refuse a cache folder that is, or holds, a symbolic link (its index files and
    their journals, ``locks/``, ``drafts/``): a repository can commit one (``git add
    -f``), and kexp would create or write the file it points to, anywhere."""
    if folder.is_symlink():
        raise KexpError(f"{folder} is a symbolic link: remove it (kexp recreates its cache)")
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_symlink():
            raise KexpError(
                f"{entry.path} is a symbolic link: kexp never writes through one in its cache "
                f"folder; remove it (kexp recreates what {CACHE_DIR}/ holds)"
            )


_STORE_README = """\
# Experiments

One Markdown file per kernel optimization experiment, recorded with kexp:
`experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md` (`<xx>`: the id's last two characters,
so that no folder grows past what a forge's web page lists).

Where the documentation is: `kexp --help` lists the commands, and `kexp COMMAND --help`
explains one, with examples; `kexp skill install` writes the agent skill
(`SKILL.md`: every field of an experiment and how to record one), which people can read
too. The whole of it (the file format, the MCP server, the timing files, sharing
through git) is in kexp's source: README.md and docs/ of its repository, and of its
source distribution (the kexp-VERSION.tar.gz beside the wheel).

Add one with `kexp new` (opens your editor) or `kexp add` (for agents, from flags or a
YAML/JSON document on stdin), then open a pull request. Check files with
`kexp validate`; browse with `kexp top`, `kexp list`, `kexp show ID`.

Files other than `<id>-<slug>.md` (like this README) are not experiments and are left
alone.
"""
