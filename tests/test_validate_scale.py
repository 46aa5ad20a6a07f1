"""``kexp validate`` of a whole store streams it: the same problems as before, flat memory.

``Store.validate`` used to read every file into a whole document and keep them all until
the store-wide checks ran (1.7 GB at 100,000 files). It now keeps of each file only what
those checks need, checks canonical files without the full parse, and reads again only
the few files a store-wide problem is reported in. These tests hold it to the problems
the old way reported (kept below as the reference, as it was), on real stores in real
git repositories: duplicate ids, dangling pid and combines, lineage cycles, broken and
unreadable files, warnings, unknown base commits; for the whole store, for files given,
at a revision, and split between two processes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
import tracemalloc
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from kexp import Store
from kexp.core.problems import Problem, Severity, format_problems, sort_problems
from kexp.core.progress import reporting
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.fileformat import parse
from kexp.format.filelinks import FileLinks, links_of, scan_bytes
from kexp.format.quickcheck import quick_fields
from kexp.format.reading import real_paths
from kexp.format.rules import warns_if_valid
from kexp.format.storechecks import check_store, store_findings
from kexp.format.validate import CheckedFile, check_bytes, read_and_check
from kexp.storage.validation import outside_layout_problems
from tests.conftest import REPO_ROOT, git, run_kexp

# --- the reference: validation as it was before it streamed (whole documents kept) ---


def reference_validate(
    store: Store, paths: list[Path] | None = None, *, strict: bool = False
) -> list[Problem]:
    """``Store.validate`` as it was: every file checked whole, then the store-wide checks."""
    everything = store.check_files()
    if paths is None:
        selected = everything
    else:
        wanted = {p.resolve() for p in paths}
        selected = [c for c in everything if c.path.resolve() in wanted]
        known = {c.path.resolve() for c in everything}
        selected += [store.check_file(p) for p in paths if p.resolve() not in known]
    index: dict[str, list[Path]] = {}
    for item in everything:
        if item.document is not None and isinstance(item.document.fields.get("id"), str):
            index.setdefault(item.document.fields["id"], []).append(item.path)
    problems = [p for item in selected for p in item.problems]
    problems += reference_check_store(selected, index)
    problems += reference_base_commit_problems(selected, store.code_repo, strict=strict)
    # Files outside kexp's layout (the folders '1', '1-x' below): warned of as they were
    # since plain validate warns of them, a check of the path alone (test_moved_files).
    problems += outside_layout_problems(store, [str(c.path) for c in selected])
    return sort_problems(problems)


def _error(path: Path, at: tuple[int, int], code: str, field: str, message: str) -> Problem:
    hints = {
        "duplicate-id": "a copied file, or two branches that made the same id: give one "
        "file a new id and the name that goes with it (for this one: kexp re-id ",
        "dangling-pid": "fix the id (kexp list shows them), or set pid: '' if the parent "
        "was never recorded",
        "dangling-combines": "list only ids of recorded experiments",
        "lineage-cycle": "a parent must be an earlier experiment: fix one pid in the loop",
    }
    hint = hints[code]
    if code == "duplicate-id":  # the command that gives this file a new id
        hint = f"{hint}{shlex.quote(str(path))})"
    return Problem(str(path), *at, "error", code, field, message, hint)


def reference_check_store(
    checked: Sequence[CheckedFile], known_ids: Mapping[str, Sequence[Path]] | None = None
) -> list[Problem]:
    """``kexp.format.storechecks.check_store`` as it was."""
    problems: list[Problem] = []
    by_id: dict[str, list[CheckedFile]] = {}
    for item in checked:
        if item.document is not None and isinstance(item.document.fields.get("id"), str):
            by_id.setdefault(item.document.fields["id"], []).append(item)
    ids: Mapping[str, Sequence[Path]] = (
        known_ids
        if known_ids is not None
        else {key: [c.path for c in items] for key, items in by_id.items()}
    )
    for exp_id, items in by_id.items():
        paths = sorted({str(p) for p in ids.get(exp_id, [])} | {str(c.path) for c in items})
        if len(paths) > 1:
            for item in items:
                assert item.document is not None
                others = ", ".join(p for p in paths if p != str(item.path))
                problems.append(
                    _error(
                        item.path,
                        item.document.position(("id",)),
                        "duplicate-id",
                        "id",
                        f"id {exp_id} is also used by {others}",
                    )
                )
    parents: dict[str, str] = {}
    for item in checked:
        doc = item.document
        if doc is None:
            continue
        pid = doc.fields.get("pid")
        if isinstance(pid, str) and pid:
            if pid not in ids:
                problems.append(
                    _error(
                        item.path,
                        doc.position(("pid",)),
                        "dangling-pid",
                        "pid",
                        f"parent {pid} is not in the store",
                    )
                )
            elif isinstance(doc.fields.get("id"), str):
                parents[doc.fields["id"]] = pid
        combines = doc.fields.get("combines")
        if isinstance(combines, list):
            for index, other in enumerate(combines):
                if isinstance(other, str) and other not in ids:
                    problems.append(
                        _error(
                            item.path,
                            doc.position(("combines", index)),
                            "dangling-combines",
                            f"combines.{index}",
                            f"combined experiment {other} is not in the store",
                        )
                    )
    outside: dict[str, str | None] = {}

    def parent_of(exp_id: str) -> str | None:
        if exp_id in by_id:
            return parents.get(exp_id)
        if exp_id not in outside:
            files = ids.get(exp_id, [])
            doc = read_and_check(Path(files[0])).document if files else None
            pid = doc.fields.get("pid") if doc is not None else None
            outside[exp_id] = pid if isinstance(pid, str) and pid else None
        return outside[exp_id]

    for item in checked:
        doc = item.document
        if doc is None or not isinstance(doc.fields.get("id"), str):
            continue
        start = doc.fields["id"]
        seen = [start]
        current = parent_of(start)
        while current is not None and current not in seen:
            seen.append(current)
            current = parent_of(current)
        if current == start:
            chain = " -> ".join([*seen, start])
            problems.append(
                _error(
                    item.path,
                    doc.position(("pid",)),
                    "lineage-cycle",
                    "pid",
                    f"the pid chain loops back to this experiment: {chain}",
                )
            )
    return problems


def reference_base_commit_problems(
    checked: Sequence[CheckedFile], code_repo: Path, *, strict: bool = False
) -> list[Problem]:
    """``kexp.gitops.provenance.base_commit_problems`` as it was."""
    from kexp.gitops import git as kgit

    values: dict[str, list[CheckedFile]] = {}
    for item in checked:
        if item.document is None:
            continue
        value = item.document.fields.get("base_commit")
        if isinstance(value, str) and kgit.is_hex(value, 7):
            values.setdefault(value, []).append(item)
    if not values:
        return []
    repo = kgit.find_repo(code_repo)
    if repo is None:
        return []
    found = kgit.lookup_objects(repo, values)
    where = kgit.toplevel(repo)
    problems: list[Problem] = []
    severity: Severity
    for value, items in values.items():
        info = found[value]
        if info.status == "found" and info.type == "commit":
            continue
        if info.status == "missing":
            severity = "error" if strict else "warning"
            code = "base-commit-unknown"
            message = f"base commit {value} is not in the code repository {where}"
            hint = kgit.fetch_hint(repo, value)
        elif info.status == "ambiguous":
            severity, code = "error", "base-commit-ambiguous"
            message = f"base commit {value} is ambiguous in {where}"
            hint = "write the full 40-character hash (git rev-parse <commit>)"
        else:
            severity, code = "error", "base-commit-not-commit"
            message = f"base_commit {value} names a {info.type}, not a commit, in {where}"
            hint = "write the hash of the commit the change was made on (git log --oneline)"
        for item in items:
            assert item.document is not None
            line, column = item.document.position(("base_commit",))
            problems.append(
                Problem(str(item.path), line, column, severity, code, "base_commit", message, hint)
            )
    return problems


# --- stores to check ---------------------------------------------------------------------


def experiment(
    exp_id: str,
    *,
    pid: str = "''",
    base: str = "",
    combines: str | None = None,
    extra: str = "",
    body: str = "## Detailed description\n\n**Approach**: unroll by 4.\n",
    file_id: str | None = None,
) -> str:
    """The text of an experiment file as kexp writes it (``pid``, ``combines`` and
    ``extra`` are written as given: front-matter lines, quoted or not)."""
    lines = [
        "---",
        f"id: {file_id or exp_id}",
        f"pid: {pid}",
        "change_summary: Unrolled the inner loop by 4 - +1.90%",
        "score: 1.019",
        *(["measured_against: parent"] if pid not in ("''", "") else []),
        *([f"combines: {combines}"] if combines is not None else []),
        "status: done",
        "is_buggy: false",
        "operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'",
        "dtype_sig: bf16",
        "env: MI300X, ROCm 7.0.0",
        f"base_commit: {base or '3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e'}",
        "created_at: '2026-11-29T15:52:36Z'",
        *([extra] if extra else []),
        "---",
        "",
        body,
    ]
    return "\n".join(lines)


def hex_id(n: int) -> str:
    return f"{n:016x}"


A, B, C, D, E, E2, F, G, H, INTO, J, K, L, M, N, P, Q, R, S, T, U, V, W = (
    hex_id(0x6749F3A000000000 + n) for n in range(23)
)
#: Ids of no experiment (with letters: YAML would read digits alone as a number).
NOWHERE, NOWHERE2 = "aaaa000000000001", "bbbb000000000002"


def write(root: Path, relative: str, text: str | bytes) -> Path:
    path = root / "experiments" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def messy_store(repo: Path) -> dict[str, Path]:
    """A store with every kind of problem, canonical and hand-written files mixed."""
    head = git(repo, "rev-parse", "HEAD")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    files: dict[str, Path] = {}

    def put(name: str, relative: str, text: str | bytes) -> None:
        files[name] = write(repo, relative, text)

    put("A", f"2026/11/{A}-root.md", experiment(A, base=head))
    put("B", f"2026/11/{B}-child.md", experiment(B, pid=A, base=head))
    put("C", f"2026/11/{C}-grandchild.md", experiment(C, pid=B, base=head[:9]))
    # combines: one known, one nowhere (flow list, canonical), and a hand-written block list
    put("D", f"2026/11/{D}-combined.md", experiment(D, combines=f"[{A}, {NOWHERE}]", base=head))
    put(
        "D2",
        f"2026/11/{R}-combined-block.md",
        experiment(R, combines=f"\n- {C}\n- '{NOWHERE2}'  # typed by hand", base=head),
    )
    # dangling pid: canonical, and hand-written (double quotes, spaces, a comment)
    put("E", f"2026/11/{E}-orphan.md", experiment(E, pid=NOWHERE))
    put("E2", f"2026/11/{E2}-orphan-by-hand.md", experiment(E2, pid=f'  "{NOWHERE2}"  # lost'))
    # a loop of two, a loop of one, and a chain leading into a loop
    put("F", f"2026/12/{F}-loop.md", experiment(F, pid=G))
    put("G", f"2026/12/{G}-loop.md", experiment(G, pid=f"'{F}'"))
    put("H", f"2026/12/{H}-self.md", experiment(H, pid=H))
    put("I", f"2026/12/{INTO}-into-loop.md", experiment(INTO, pid=F))
    # one id in two files (two branches), and a child of it
    put("J1", f"2026/11/{J}-on-main.md", experiment(J, base=head))
    put("J2", f"2026/12/{J}-on-a-branch.md", experiment(J, pid=A, base=head))
    put("J3", f"2026/12/{S}-child-of-twins.md", experiment(S, pid=J))
    # the same id in folders '1' and '1-x': as paths sort ('1' first), the file in '1-x'
    # is the last, whose pid makes the loop K -> M -> K (not K -> L -> K)
    put("K1", f"2026/1/{K}-first.md", experiment(K, pid=L))
    put("K2", f"2026/1-x/{K}-second.md", experiment(K, pid=M))
    put("L", f"2026/1/{L}-l.md", experiment(L, pid=K))
    put("M", f"2026/1/{M}-m.md", experiment(M, pid=K))
    # a file whose front-matter id (A's) is not its name's: a mismatch and a duplicate
    put("N", f"2026/11/{N}-copied.md", experiment(N, file_id=A))
    # broken: YAML that does not parse, a schema error with a dangling pid, buggy
    put("P", f"2026/11/{P}-broken.md", experiment(P).replace("env: MI300X", "env: 'MI300X"))
    put(
        "Q",
        f"2026/11/{Q}-bad-score.md",
        experiment(Q, pid=NOWHERE).replace("score: 1.019", "score: fast"),
    )
    put("T", f"2026/11/{T}-buggy.md", experiment(T).replace("is_buggy: false", "is_buggy: true"))
    # warnings only: an unknown field, score vs results, a value YAML would retype
    put("U", f"2026/11/{U}-unknown-field.md", experiment(U, extra="gpu_count: 8"))
    put(
        "V",
        f"2026/11/{V}-results.md",
        experiment(
            V,
            extra="results:\n- {config: a, baseline: 10.0, candidate: 5.0, speedup: 2.0}",
        ),
    )
    put("W", f"2026/11/{W}-retyped.md", experiment(W).replace("dtype_sig: bf16", "dtype_sig: yes"))
    # base commits: unknown (twice), a tree (not a commit)
    put(
        "X1", f"2026/10/{hex_id(0x6A01)}-unknown-base.md", experiment(hex_id(0x6A01), base="a" * 40)
    )
    put("X2", f"2026/10/{hex_id(0x6A02)}-tree-base.md", experiment(hex_id(0x6A02), base=tree))
    put("X3", f"2026/10/{hex_id(0x6A03)}-unknown-too.md", experiment(hex_id(0x6A03), base="a" * 40))
    # CRLF line endings and a byte-order mark (the lines of keys count the same)
    crlf = experiment(hex_id(0x6A04), pid=NOWHERE).replace("\n", "\r\n").encode()
    put("Y1", f"2026/10/{hex_id(0x6A04)}-crlf.md", crlf)
    bom = b"\xef\xbb\xbf" + experiment(hex_id(0x6A05), pid=NOWHERE, base="b" * 40).encode()
    put("Y2", f"2026/10/{hex_id(0x6A05)}-bom.md", bom)
    # not an experiment file, a hidden folder (a writer's temporary files), a link
    write(repo, "README.md", "# Experiments\n")
    write(repo, f"2026/11/.tmp/{hex_id(0x6B01)}-half-written.md", "---\nid: x\n")
    link = repo / "experiments" / "2026" / "11" / f"{hex_id(0x6B02)}-link.md"
    link.symlink_to(files["A"])
    files["link"] = link
    return files


@pytest.fixture
def messy(repo: Path, store: Store) -> dict[str, Path]:
    return messy_store(repo)


def codes(problems: Iterable[Problem]) -> set[str]:
    return {p.code for p in problems}


# --- the whole store ---------------------------------------------------------------------


def test_whole_store_reports_what_the_full_parse_reported(
    store: Store, messy: dict[str, Path]
) -> None:
    found = store.validate()
    assert found == reference_validate(store)
    # Every kind of problem is there, so the comparison means something.
    assert {
        "duplicate-id",
        "dangling-pid",
        "dangling-combines",
        "lineage-cycle",
        "id-mismatch",
        "yaml-syntax",
        "wrong-type",
        "buggy-without-error",
        "unknown-field",
        "score-results-mismatch",
        "yaml-implicit-type",
        "base-commit-unknown",
        "base-commit-not-commit",
        "symlink",
    } <= codes(found), codes(found)
    loops = {p.message for p in found if p.code == "lineage-cycle"}
    assert f"the pid chain loops back to this experiment: {K} -> {M} -> {K}" in loops
    into_loop = [p for p in found if p.path == str(messy["I"])]  # leads into a loop only
    assert into_loop and "lineage-cycle" not in codes(into_loop)


def test_strict_makes_unknown_base_commits_errors_as_before(
    store: Store, messy: dict[str, Path]
) -> None:
    found = store.validate(strict=True)
    assert found == reference_validate(store, strict=True)
    assert {p.severity for p in found if p.code == "base-commit-unknown"} == {"error"}


def test_positions_of_store_wide_problems_are_the_full_parsers(
    store: Store, messy: dict[str, Path]
) -> None:
    wide = {"duplicate-id", "dangling-pid", "dangling-combines", "lineage-cycle"}
    found = [p for p in store.validate() if p.code in wide or p.code.startswith("base-commit")]
    assert len(found) >= 15
    for problem in found:
        data = Path(problem.path).read_bytes()
        where: tuple[str | int, ...] = (
            ("combines", int(problem.field.split(".")[1]))
            if problem.field.startswith("combines.")
            else (problem.field,)
        )
        assert (problem.line, problem.column) == parse(data, problem.path).position(where)
    # the files quick_fields answers for are among them (no full parse in the first pass)
    quick = [p for p in found if quick_fields(Path(p.path).read_bytes(), p.path) is not None]
    assert {p.code for p in quick} >= wide


def test_paths_are_listed_as_store_paths_lists_them(store: Store, messy: dict[str, Path]) -> None:
    assert store.source.files() == [str(p) for p in store.paths()]


def test_the_command_prints_the_same_problems_and_counts_the_files(
    repo: Path, store: Store, messy: dict[str, Path]
) -> None:
    result = run_kexp("validate", cwd=repo, env={"NO_COLOR": "1"})
    expected = reference_validate(store)
    assert result.returncode == 1
    os.chdir(repo)  # the command shows paths relative to where it runs
    try:
        # (a hint several problems share, each with its own values, printed once)
        assert result.stdout == "".join(f"{text}\n" for text in format_problems(expected))
    finally:
        os.chdir(REPO_ROOT)
    errors = sum(p.severity == "error" for p in expected)
    summary = (
        f"{len(store.paths())} file(s) checked: {errors} error(s), "
        f"{len(expected) - errors} warning(s)"
    )
    assert summary in result.stderr


# --- files given -------------------------------------------------------------------------


def test_files_given_report_what_they_reported(
    repo: Path, store: Store, messy: dict[str, Path], tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere" / f"{hex_id(0x6C01)}-outside.md"
    outside.parent.mkdir()
    outside.write_text(experiment(hex_id(0x6C01), pid=L, combines=f"[{NOWHERE}]"))
    copy = tmp_path / "elsewhere" / f"{J}-copy.md"
    shutil.copy(messy["J1"], copy)
    via_link = tmp_path / "linked"
    via_link.symlink_to(repo / "experiments" / "2026" / "12")
    selections = [
        [messy["F"]],  # in a loop with G, which is not checked: G's pid is read
        [messy["K1"], messy["L"]],  # a duplicated id, half of its files checked
        [messy["J2"], messy["E2"], messy["P"], messy["link"]],
        [outside, copy, messy["A"], outside],  # outside the store, one given twice
        [via_link / messy["H"].name, messy["D"].relative_to(repo)],  # other spellings
        [repo / "experiments" / "2026" / "12" / f"{hex_id(0x6C02)}-missing.md"],
    ]
    os.chdir(repo)
    try:
        for paths in selections:
            assert store.validate(paths) == reference_validate(store, paths), paths
            assert store.validate(paths, strict=True) == reference_validate(
                store, paths, strict=True
            )
    finally:
        os.chdir(REPO_ROOT)


def test_real_paths_are_os_realpath(repo: Path, messy: dict[str, Path], tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    linked.symlink_to(repo / "experiments" / "2026")
    paths = [
        *(str(p) for p in messy.values()),
        str(linked / "12" / messy["H"].name),
        str(linked / "11" / messy["link"].name),  # a link in a linked folder
        str(linked / "11" / "missing.md"),
        str(repo / "experiments" / "2026" / ".." / "2026" / "11"),
    ]
    assert real_paths(paths) == [os.path.realpath(p) for p in paths]


# --- at a revision -----------------------------------------------------------------------


def test_store_at_a_revision_reports_what_it_reported(
    repo: Path, store: Store, messy: dict[str, Path]
) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a messy store")
    at = store.at("HEAD")
    assert at.validate() == reference_validate(at)
    assert at.validate([messy["F"], messy["K2"]]) == reference_validate(
        at, [messy["F"], messy["K2"]]
    )
    assert codes(at.validate()) >= {"duplicate-id", "lineage-cycle", "dangling-combines"}


# --- one file at a time ------------------------------------------------------------------


def corpus_files(root: Path) -> list[Path]:
    return sorted(
        [
            *root.rglob("experiments/**/*.md"),
            *(REPO_ROOT / "tests" / "corpus").rglob("*.md"),
            *(REPO_ROOT / "experiments").rglob("*.md"),
        ]
    )


@pytest.mark.parametrize("tolerance", [DEFAULT_SETTINGS.score_tolerance, 0.9])
def test_scan_bytes_equals_check_bytes(
    repo: Path, messy: dict[str, Path], tolerance: float
) -> None:
    settings = Settings(score_tolerance=tolerance)
    quick = 0
    for path in corpus_files(repo):
        if path.is_symlink():
            continue
        data = path.read_bytes()
        checked = check_bytes(data, path, settings)
        fields = checked.document.fields if checked.document is not None else None
        problems, links = scan_bytes(data, str(path), settings)
        assert problems == checked.problems, path
        assert links[:5] == FileLinks.of(str(path), fields)[:5], path
        accepted = quick_fields(data, str(path), settings)
        if accepted is not None:
            quick += 1
            # warns_if_valid foresees every warning of a file quick_fields accepts
            assert warns_if_valid(accepted, settings) == bool(checked.problems), path
            assert links.lines is not None
        # the key lines kept are where the full parser puts those keys
        exact = parse(data, str(path)) if checked.document is not None else None
        for found in (links, links_of(checked)):
            for key in ("id", "pid", "base_commit"):
                at = found.position((key,))
                if at is not None and fields is not None and key in fields:
                    assert exact is not None
                    assert at == exact.position((key,)), (path, key)
    assert quick >= 20


def test_warnings_of_canonical_files_are_not_skipped(tmp_path: Path) -> None:
    unknown = experiment(U, extra="gpu_count: 8")
    results = experiment(
        V, extra="results:\n- {config: a, baseline: 10.0, candidate: 5.0, speedup: 2.0}"
    )
    for exp_id, text in ((U, unknown), (V, results)):
        path = tmp_path / f"{exp_id}-x.md"
        fields = quick_fields(text.encode(), str(path))
        problems, _ = scan_bytes(text.encode(), str(path))
        assert problems == check_bytes(text.encode(), path).problems
        assert [p.severity for p in problems] == ["warning"]
        if fields is not None:
            assert warns_if_valid(fields)


# --- long lineages, many files, two processes, memory -----------------------------------


def test_long_lineages_cost_time_in_proportion() -> None:
    count = 20000
    ids = [hex_id(0x6D00000000000000 + n) for n in range(count)]
    chain = [
        FileLinks(f"/s/{exp_id}.md", exp_id, ids[n - 1] if n else None, ())
        for n, exp_id in enumerate(ids)
    ]
    # the last two name each other: a loop at the end of a lineage of 20,000
    loop = [*chain[:-2], chain[-2]._replace(pid=ids[-1]), chain[-1]]
    started = time.perf_counter()
    assert store_findings(chain) == []
    found = store_findings([*loop, chain[0]._replace(path="/s/again.md")])
    assert time.perf_counter() - started < 5  # the old checks took minutes
    assert [(f.file, f.code) for f in found] == [
        (0, "duplicate-id"),
        (count, "duplicate-id"),
        (count - 2, "lineage-cycle"),
        (count - 1, "lineage-cycle"),
    ]


_LINEAGE_IDS = ["a", "b", "c", "d", "e", "f"]


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_LINEAGE_IDS),
            st.one_of(st.none(), st.sampled_from([*_LINEAGE_IDS, "zz", "0"])),
        ),
        max_size=12,
    )
)
def test_every_lineage_loop_is_found_whatever_the_order_of_ids(
    links: list[tuple[str, str | None]],
) -> None:
    """Loops are found by walks from the items whose pid goes up (sorts after their id):
    held equal to following every item's chain, on random lineages with repeated ids,
    unknown parents and loops of any length, in both directions."""
    items = [FileLinks(f"/s/{n}.md", exp_id, pid, ()) for n, (exp_id, pid) in enumerate(links)]
    known = {exp_id for exp_id, _ in links}
    parent: dict[str, str | None] = {exp_id: None for exp_id in known}
    for exp_id, pid in links:  # the last pid naming a known id, as the docstring says
        if pid is not None and pid in known:
            parent[exp_id] = pid
    expected = []
    for number, (exp_id, _) in enumerate(links):
        chain, current = [exp_id], parent[exp_id]
        while current is not None and current != exp_id and len(chain) <= len(known):
            chain.append(current)
            current = parent[current]
        if current == exp_id:
            expected.append((number, " -> ".join([*chain, exp_id])))
    found = [
        (f.file, f.message.rpartition(": ")[2])
        for f in store_findings(items)
        if f.code == "lineage-cycle"
    ]
    assert found == expected


def test_check_store_of_documents_reports_what_it_reported(
    store: Store, messy: dict[str, Path]
) -> None:
    everything = store.check_files()
    index: dict[str, list[Path]] = {}
    for item in everything:
        if item.document is not None and isinstance(item.document.fields.get("id"), str):
            index.setdefault(item.document.fields["id"], []).append(item.path)
    assert check_store(everything) == reference_check_store(everything)
    some = everything[::3]
    assert check_store(some, index) == reference_check_store(some, index)


def fill(repo: Path, count: int, base: str = "") -> None:
    """``count`` canonical experiments, lineages of ten, in month folders of 500, on
    ``base`` (default: the repository's HEAD)."""
    head = base or git(repo, "rev-parse", "HEAD")
    for n in range(count):
        exp_id = hex_id(0x6C00000000000000 + n)
        pid = hex_id(0x6C00000000000000 + n - 1) if n % 10 else "''"
        write(
            repo,
            f"2025/{n // 500 + 1:02d}/{exp_id}-filler.md",
            experiment(exp_id, pid=pid, base=head),
        )


def test_a_large_store_split_between_two_processes_reports_the_same(
    repo: Path, store: Store, messy: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kexp.storage.parallel import PARALLEL_MIN_FILES

    fill(repo, PARALLEL_MIN_FILES + 200)
    # problems in both halves: first and last folders
    write(repo, f"2025/01/{hex_id(0x6F01)}-dup.md", experiment(hex_id(0x6C00000000000005)))
    write(repo, f"2027/01/{hex_id(0x6F02)}-late.md", experiment(hex_id(0x6F02), pid=F))
    total = len(store.paths())
    seen: list[tuple[int, int]] = []
    with reporting(lambda done, of: seen.append((done, of))):
        split = store.validate()
    assert split == reference_validate(store)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    done = [d for d, _ in seen]
    assert done == sorted(done)  # forward only, one bar
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    assert store.validate() == split


def test_memory_does_not_grow_with_the_files_contents(
    repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    count = 1500
    # every file with a store-wide problem: a base commit the repository does not hold
    # (a shallow clone in CI), and the roots a parent that is not in the store
    fill(repo, count, base="c" * 40)
    for path in sorted((repo / "experiments").rglob("*.md"))[::2]:
        measured = "score: 1.019\nmeasured_against: parent\n"
        text = path.read_text().replace("pid: ''", f"pid: {NOWHERE}")
        path.write_text(text.replace("score: 1.019\n", measured, 1) if NOWHERE in text else text)
    expected = reference_validate(store)
    assert len(expected) == count + count // 10  # the roots among them: dangling pid
    store.validate()  # imports and caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        found = store.validate()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert found == expected
    # A whole document is about 17 kB; what is kept of a file is a few hundred bytes,
    # and the problems reported (about 1 kB each here, their messages and hints).
    assert peak < count * 3000, peak
