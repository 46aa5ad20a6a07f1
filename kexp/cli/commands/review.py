"""The pull-request command: review."""

from __future__ import annotations

import click

from kexp.cli.commands.common import get_store
from kexp.cli.commands.terminal import echo_json, echo_raw, progress

#: The longest review a comment gets by default: under GitHub's 65,536 characters.
MAX_COMMENT_CHARS = 60_000


@click.command()
@click.argument("base")
@click.argument("head", required=False)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
    help="markdown: a comment to post on the pull request; json: the same content as data.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json).")
@click.option(
    "--max-chars",
    type=click.IntRange(min=0),
    default=MAX_COMMENT_CHARS,
    show_default=True,
    help="Markdown of at most about N characters, to fit a forge's comment: each long "
    "section lists its first entries and says how many more there are. 0: everything.",
)
@click.pass_context
def review(
    ctx: click.Context,
    base: str,
    head: str | None,
    output_format: str,
    as_json: bool,
    max_chars: int,
) -> None:
    """Summarise what a branch changes in the store, for its pull request.

    Compares HEAD (a revision; default: the working tree, uncommitted files included)
    with the merge base of BASE and HEAD, as the forge's pull-request diff does. Lists
    the experiments added, corrected and removed (score, Δ vs parent, outcome, rank
    on their operator; a new best is called out), each corrected field old → new, the
    validation problems of the changed files and the store-wide problems the change
    causes, the lessons it adds, and a Mermaid graph of the lineage it touches.
    Experiment text is escaped, so it cannot alter the comment. What a reviewer must
    act on comes first; a long review is held to --max-chars (a GitHub comment takes
    65,536), whole sections each listing its first entries and counting the rest.

    Exits 0 whatever the problems (gate CI with kexp validate --changed BASE).
    Needs the history back to the merge base: fetch it in CI (fetch-depth: 0).

    Python: kexp.review_changes(base, head) (kexp.review.render.render_markdown makes the
    comment of it).

    \b
    Examples:
      kexp review main                       # this branch, as a PR comment
      kexp review origin/main HEAD --json    # the same content as data
      gh pr comment 42 --body "$(kexp review origin/main HEAD)"
      kexp review main --max-chars 0         # everything, however long
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.review.build import render_markdown, to_json
    from kexp.review.build import review as review_changes

    store = get_store(ctx)
    with progress("reading"):
        result = review_changes(store, base, head)
    if as_json or output_format == "json":
        echo_json(to_json(result))
    else:
        bound = max_chars or None
        root = ctx.find_root().params.get("root")  # named again by "--max-chars 0"
        given = None if root is None else str(root)
        echo_raw(render_markdown(result, max_chars=bound, root=given).rstrip("\n"))


COMMANDS = (review,)
