"""The agent skill ``kernel-exp-history``: where it lives and how to install it.

The Python twin of ``kexp skill install [--claude | --cursor | --dir DIR]`` is
:func:`install_skill`. It copies the skill folder (``SKILL.md`` and ``references/``)
into ``.claude/skills/`` or ``.cursor/skills/`` of the project (the git repository
holding the working directory, else the working directory), or into any skills folder.
Installing again replaces the skill's files with this version's; other files there are
left alone.
"""

from __future__ import annotations

from pathlib import Path

from kexp import atomic
from kexp.errors import KexpError

#: The skill's name: its folder name and the ``name`` in its front-matter.
SKILL_NAME = "kernel-exp-history"
#: Where each agent looks for project skills, relative to the project.
TARGETS = {"claude": Path(".claude") / "skills", "cursor": Path(".cursor") / "skills"}

_PACKAGED = Path(__file__).parent / "_data" / "skill" / SKILL_NAME
_SOURCE_TREE = Path(__file__).parent.parent / "skill" / SKILL_NAME


def skill_source() -> Path:
    """The skill folder shipped with kexp (packaged, or the source tree when editable)."""
    for folder in (_PACKAGED, _SOURCE_TREE):
        if (folder / "SKILL.md").is_file():
            return folder
    raise KexpError(
        f"the {SKILL_NAME} skill is missing from this kexp installation "
        f"(looked in {_PACKAGED} and {_SOURCE_TREE}); reinstall kexp"
    )


def skill_files() -> list[Path]:
    """The skill's files, relative to its folder (caches and hidden files left out)."""
    source = skill_source()
    return sorted(
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file()
        and not any(
            part.startswith(".") or part == "__pycache__" for part in path.relative_to(source).parts
        )
    )


def project_root(start: Path | str | None = None) -> Path:
    """The top of the git repository holding ``start`` (default: the working
    directory), else ``start`` itself."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def skill_destination(
    target: str = "claude",
    *,
    directory: Path | str | None = None,
    project: Path | str | None = None,
) -> Path:
    """Where :func:`install_skill` puts the skill folder.

    ``directory`` (a skills folder) wins; otherwise ``target`` (``claude`` or
    ``cursor``) under the project root (see :func:`project_root`).
    """
    if directory is not None:
        return Path(directory) / SKILL_NAME
    if target not in TARGETS:
        raise KexpError(f"unknown skill target {target!r}: use {', '.join(TARGETS)} or a directory")
    return project_root(project) / TARGETS[target] / SKILL_NAME


def install_skill(
    target: str = "claude",
    *,
    directory: Path | str | None = None,
    project: Path | str | None = None,
) -> list[Path]:
    """Copy the skill into an agent's skills folder; returns the files written.

    ``target`` is ``claude`` (``.claude/skills/``) or ``cursor`` (``.cursor/skills/``)
    of the project; ``directory`` installs into that skills folder instead. Each file
    is replaced atomically.
    """
    source = skill_source()
    destination = skill_destination(target, directory=directory, project=project)
    written: list[Path] = []
    try:
        for relative in skill_files():
            path = destination / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.replace(path, (source / relative).read_bytes())
            written.append(path)
    except OSError as exc:
        raise KexpError(
            f"cannot install the skill into {destination}: {exc.strerror or exc}"
        ) from None
    return written
