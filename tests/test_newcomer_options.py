"""What a newcomer's trial of kexp add, validate and the views tripped on: the option
a missing field is given with, a root recorded without its campaign, the field names
taken as options, the legends. Each a test that failed before its fix."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from kexp import Store
from kexp.cli.main import main

BASE = '{"b8": [10.0, 10.1, 10.2, 9.9, 10.0]}\n'
CAND = '{"b8": [9.0, 9.1, 9.2, 8.9, 9.0]}\n'


def kexp(repo: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["--root", str(repo), *args], input=input)


def timings(repo: Path) -> tuple[str, ...]:
    (repo / "base.json").write_text(BASE)
    (repo / "cand.json").write_text(CAND)
    return ("--baseline", str(repo / "base.json"), "--candidate", str(repo / "cand.json"))


def one_line(result: Result) -> str:
    """The one line of an error, checked to be one line starting ``kexp: error:``."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), result.stderr
    return lines[0]


# --- a field left out names the option that gives it ---------------------------------------


def test_add_of_timings_alone_with_an_empty_stdin_names_the_summary_option(
    repo: Path, store: Store
) -> None:
    """An agent's or CI's stdin is no terminal but empty: it is not the document."""
    result = kexp(repo, "add", *timings(repo), input="")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "--summary TEXT" in said and "stdin" not in said, said
    more = kexp(repo, "add", *timings(repo), "--operator", "k.cu: k", input="")
    assert more.exit_code == 2 and "--summary TEXT" in one_line(more), more.stderr
    assert "experiments/" not in more.stderr  # no path of a file never written
    assert store.list_experiments() == []


def test_a_document_without_a_summary_names_the_field_and_the_option(repo: Path) -> None:
    result = kexp(repo, "add", input="score: 1.02\noperator_sig: 'k.cu: k'\n")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "change_summary" in said and "--summary TEXT" in said, said


def test_a_field_refused_at_add_is_hinted_with_its_option(repo: Path) -> None:
    result = kexp(repo, "add", "--summary", "x" * 90, "--score", "1.1")
    assert result.exit_code == 1, result.output
    (hint,) = [line for line in result.stderr.splitlines() if "hint:" in line]
    assert "(kexp add --summary)" in hint, result.stderr


def test_add_without_a_score_names_the_options_that_give_it(repo: Path) -> None:
    result = kexp(repo, "add", "--summary", "x - y", input="")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "--score X" in said and "--baseline FILE --candidate FILE" in said, said
