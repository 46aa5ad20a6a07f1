"""The review comment links nobody and notifies nobody: bare URLs, ``www.`` hosts,
e-mail addresses, ``@user`` / ``@org/team`` mentions and issue references written in
experiments reach the pull request as plain text, and read the same.

The comment is rendered with cmark-gfm, GitHub's own Markdown (autolinks included), and
the rendered text is searched for mentions and references the way GitHub's mention
filter does; experiment text comes from a real branch in a real git repository.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import cmarkgfm
from conftest import experiment_fields, git

from kexp import Store
from kexp.review.build import render_markdown, review

HOSTILE = {
    "change_summary": "Ping @octocat, see https://evil.example/x - -10%",
    "operator_sig": "www.evil.com/k.cu: @my-org/kernel-team",
    "dtype_sig": "bf16 (ask admin@example.com)",
}
KEY_INSIGHT = (
    "ask @security about HTTP://www.Evil.example/@x, fixes #1234; see GH-42 and #7, "
    "mailto:a@b.co, ftp://f.example"
)
INSIGHT = f"**Key insight**: {KEY_INSIGHT}"
#: GitHub's mention filter (html-pipeline's MentionFilter pattern), teams included.
MENTION = re.compile(
    r"(?:^|\W)@([a-z0-9][a-z0-9-]*)(?:/[a-z0-9][a-z0-9\-_]*)?(?!/)"
    r"(?=\.+[ \t\W]|\.+$|[^0-9a-zA-Z_.]|$)",
    re.IGNORECASE,
)
#: Issue references: #123, GH-123, owner/repo#123.
REFERENCE = re.compile(r"(?:^|[^\w&])(?:#|GH-)[0-9]+", re.IGNORECASE)


def rendered_prose(markdown: str) -> tuple[str, str]:
    """The comment as GitHub renders it (HTML), and its text outside code and links."""
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown)
    prose = re.sub(r"<(pre|code|a)\b.*?</\1>", " ", rendered, flags=re.DOTALL)
    return rendered, html.unescape(re.sub(r"<[^>]+>", " ", prose))


def test_review_comments_link_and_mention_nobody(repo: Path, store: Store) -> None:
    base = store.create_experiment(**experiment_fields(score=1.0))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "hostile")
    store.create_experiment(
        **experiment_fields(
            pid=base.id, score=0.9, detailed_description=f"**Approach**: x\n\n{INSIGHT}", **HOSTILE
        )
    )
    store.update_experiment(base.id, env="now @octocat's box, www.example.org")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hostile text")
    markdown = render_markdown(review(store, "main"))

    rendered, prose = rendered_prose(markdown)
    assert "<a " not in rendered, [m for m in re.findall(r"<a [^>]*>", rendered)]
    assert MENTION.findall(prose) == []
    assert REFERENCE.findall(prose) == []
    # The text reads the same (code spans included): only zero-width spaces were added.
    visible = html.unescape(re.sub(r"<[^>]+>", " ", rendered)).replace("\u200b", "")
    for text in [*HOSTILE.values(), KEY_INSIGHT]:
        assert text in " ".join(visible.split()), text
    assert "now @octocat's box, www.example.org" in visible


def test_the_same_text_unescaped_would_link_and_mention() -> None:
    """The checks above can fail: GitHub's Markdown links these, and they mention."""
    raw = " ".join([*HOSTILE.values(), INSIGHT])
    rendered, prose = rendered_prose(raw)
    assert rendered.count("<a ") >= 5
    assert {"octocat", "security"} <= set(MENTION.findall(prose))
    assert REFERENCE.findall(prose)
