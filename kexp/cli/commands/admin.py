"""Store and environment commands: validate, init, env, migrate-layout."""

from __future__ import annotations

from pathlib import Path

import click

from kexp.cli.commands.common import EXIT_OK, EXIT_PROBLEMS, get_store, refs_options, rev_option
from kexp.cli.commands.terminal import clean, echo_json, progress, styled_severities, styler


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="text: path:line:col: severity[code] field: message; github: workflow "
    "annotations; json: a list of problems.",
)
@click.option(
    "--changed",
    metavar="BASE",
    help="Only the files added or changed since revision BASE (from its merge base with "
    "HEAD, uncommitted files included), plus the store-wide checks.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="A base_commit that is not in the code repository is an error, not a warning.",
)
@rev_option
@refs_options
@click.pass_context
def validate(
    ctx: click.Context,
    paths: tuple[Path, ...],
    output_format: str,
    changed: str | None,
    strict: bool,
    rev: str | None,
    refs: tuple[str, ...],
    all_refs: bool,
) -> None:
    """Check experiment files (all by default); exit 1 if any has an error.

    With --changed BASE, every check runs on the files a branch added or changed, and
    the store-wide checks (duplicate ids, dangling pid/combines, lineage cycles) on the
    whole store: fast CI on a large store. With --refs/--all-refs, the newest version
    of every experiment of the working tree and the refs is checked.

    Python: kexp.Store.validate(paths); kexp.storage.changed.validate_changed(store, base).

    \b
    Examples:
      kexp validate
      kexp validate --format github                         # in a GitHub Actions workflow
      kexp validate --changed origin/main --format github   # in a pull request
      kexp validate experiments/2026/10/d1/6ac8bc7624*.md   # one file
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.storage.fmt import expand_paths

    store = get_store(ctx)
    if changed is not None and paths:
        raise click.UsageError("give PATHs or --changed BASE, not both")
    if changed is not None and (refs or all_refs):
        raise click.UsageError("give --changed BASE or --refs/--all-refs, not both")
    selected = expand_paths(paths, store) if paths else None
    removed = 0
    if changed is not None:
        # lazy: one command's library, loaded when that command runs
        from kexp.storage.changed import before_first_commit, check_changes

        if before_first_commit(store, changed):
            changed = None  # the first commit's change is the whole store
    with progress("validating"):
        if changed is not None:
            from kexp.gitops.provenance import strict_problems

            result = check_changes(store, changed)
            problems, selected = result.problems, result.changed_paths
            if strict:
                problems = strict_problems(problems)
            removed = len(result.removed_paths)
            checked = len(selected) + removed
        else:
            # Store.validate, and how many experiment files the store holds (no second
            # walk of a large store to count them).
            problems, in_store = store.validate_counted(selected, strict=strict)
            checked = len(selected) if selected is not None else in_store
    errors = sum(p.severity == "error" for p in problems)
    if output_format == "json":
        echo_json([p.to_dict() for p in problems])
    elif output_format == "github":
        for problem in problems:
            click.echo(clean(problem.format_github()))
    else:  # a hint that many share, once
        # lazy: one command's library, loaded when that command runs
        from kexp.core.problems import format_problems

        style = styler()
        for text in format_problems(problems):
            click.echo(styled_severities(clean(text), style))
    if output_format != "json":
        warnings_count = len(problems) - errors
        what = f"{checked} file(s) checked"
        if changed is not None:
            gone = f" ({removed} removed)" if removed else ""
            what = f"{checked} changed file(s) checked{gone}, and the store-wide checks"
        click.echo(f"{what}: {errors} error(s), {warnings_count} warning(s)", err=True)
    ctx.exit(EXIT_PROBLEMS if errors else EXIT_OK)


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
def init(directory: Path) -> None:
    """Create a store: experiments/ with a README, and the .gitignore rule for .kexp/.

    Existing files are left as they are (running it twice is harmless).

    Python: kexp.init_store(directory) (kexp.storage.location.init_store_made: what it made).

    \b
    Example:
      kexp init ~/kernels
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.storage.location import init_store_made

    made = init_store_made(directory)
    where = clean(str(directory / "experiments"))
    if made:
        click.echo(f"initialised kexp store in {where} (made {', '.join(made)})")
    else:
        click.echo(f"{where} is a kexp store already: nothing to do")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print every detected part as JSON.")
def env(as_json: bool) -> None:
    """The detected environment: GPU, CUDA/ROCm, torch, triton, CPU, compiler, OS, Python.

    On any machine: the GPU model and count and its driver when there is one
    (nvidia-smi, amd-smi or rocm-smi), the kernel toolchain present (nvcc's CUDA, ROCm,
    the installed torch and triton), the CPU model and cores, the C compiler (cc
    --version), the OS and Python. A part that cannot be found is left out (never an
    error). kexp new prefills env with it; kexp add --detect-env uses it too (and
    refuses to record an empty one).

    Python: kexp.measure.envinfo.detect_env().describe().

    \b
    Examples:
      kexp env
      kexp add --env "$(kexp env)" -f experiment.yaml
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.measure.envinfo import detect_env

    info = detect_env()
    if as_json:
        echo_json(info.to_dict())
    else:
        click.echo(clean(info.describe()))
        if not info.describe():
            click.echo("kexp: nothing detected (no GPU tools, CPU, OS or Python found)", err=True)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print every setting as JSON.")
@click.pass_context
def settings(ctx: click.Context, as_json: bool) -> None:
    """The settings in force: each value, and where it came from (kexp.toml or default).

    A team keeps its thresholds in kexp.toml beside experiments/, committed with the
    store, one setting a line (improvement_above = 1.05); every command, the Python API
    and the predecessor's module read it when they open the store.

    Python: kexp.core.settings.effective_settings(root).

    \b
    Examples:
      kexp settings
      echo 'improvement_above = 1.05' >> kexp.toml && kexp settings
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.core.settings import SETTINGS_FILE, effective_settings

    store = get_store(ctx)
    found = effective_settings(store.root)
    if as_json:
        echo_json([value.to_dict() for value in found])
        return
    width = max(len(value.name) for value in found)
    for value in found:
        origin = value.origin
        if origin != "default":
            origin += f" (default {value.default!r})"
        click.echo(f"{value.name:<{width}}  {value.value!r:>10}  {origin}")
    click.echo(
        f"set one in {clean(str(store.root / SETTINGS_FILE))}, a line each: "
        "improvement_above = 1.05",
        err=True,
    )


@click.command("migrate-layout")
@click.option("--dry-run", is_flag=True, help="Say what would move; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the moves as JSON.")
@click.pass_context
def migrate_layout(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Move month-layout files to experiments/YYYY/MM/xx/.

    Stores written by an earlier kexp keep every experiment of a month in one folder,
    which a forge's web page cannot list past 1,000 files. Each file moves to the
    folder named by the last two hex digits of its id, keeping its month and its name;
    in git, as git mv moves it (staged as a rename: kexp log follows it). Commit the
    moves, or kexp sync. Safe to run again (it finishes a migration cut short); the
    month layout keeps working unmigrated, and both layouts read as one store.

    Python: kexp.migrate_layout(dry_run=False).

    \b
    Examples:
      kexp migrate-layout --dry-run     # what would move; nothing changed
      kexp migrate-layout && kexp sync  # move, then commit and push the moves (if any)
    """
    from kexp.storage.migration import migrate_layout as migrate

    with progress("moving experiment files"):
        result = migrate(get_store(ctx), dry_run=dry_run)
    if as_json:
        echo_json(result.to_dict())
        return
    for line in result.lines():
        click.echo(clean(line))


COMMANDS = (validate, init, env, settings, migrate_layout)
