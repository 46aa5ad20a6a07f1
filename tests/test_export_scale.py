"""``kexp export`` of JSON, JSON Lines and CSV streams the store: the same bytes as
before, flat memory.

``export`` used to read every experiment whole (its texts too), make every record, and
only then write them (2.5 GB at 100,000 files for JSON Lines: at a million, more than
the machine). It now lists the front-matter from the rows, reads the texts a few files
at a time, and writes each record as it is made. These tests hold it to what the old way
wrote (kept below as the reference, as it was), through the real store and command, and
measure the memory it takes in a fresh Python.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kexp import Store
from kexp.format.outputs import write_csv
from kexp.output.export import FORMATS, RECORD_FIELDS, export, to_record, write_records
from tests.conftest import past_racy_window, run_kexp
from tests.test_validate_scale import fill


def reference_export(store: Store, output_format: str, **filters: Any) -> str:
    """What ``export`` wrote before it streamed: every experiment read whole, every
    record made, then one ``json.dump`` of the list (JSON), a line a record (JSON Lines)
    or the CSV writer over the list."""
    experiments = store.list_experiments(**filters)
    records = [to_record(e, relative_to=store.root) for e in experiments]
    out = io.StringIO()
    if output_format == "json":
        json.dump(list(records), out, indent=2, ensure_ascii=False)
        out.write("\n")
    elif output_format == "jsonl":
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        write_csv(records, out, RECORD_FIELDS)
    return out.getvalue()


def exported(store: Store, output_format: str, **filters: Any) -> str:
    out = io.StringIO()
    export(store, out, output_format, **filters)
    return out.getvalue()


@pytest.mark.filterwarnings("ignore::kexp.core.errors.NoMatchWarning")  # matching none, on purpose
@pytest.mark.parametrize("output_format", FORMATS)
def test_the_bundled_store_is_exported_as_before(bundled_root: Path, output_format: str) -> None:
    store = Store(bundled_root)
    assert exported(store, output_format) == reference_export(store, output_format)
    # a filter that keeps a few, and one that keeps none (the empty forms)
    for filters in ({"operator": "cache"}, {"operator": "no such operator"}):
        assert exported(store, output_format, **filters) == reference_export(
            store, output_format, **filters
        )


@pytest.mark.parametrize("records", [[], [{"a": 1}], [{"a": [1, {"b": "x\ny"}]}, {"a": None}]])
def test_json_written_a_record_at_a_time_is_one_indented_dump(
    records: Sequence[dict[str, Any]],
) -> None:
    out = io.StringIO()
    write_records(iter(records), out, "json")
    assert out.getvalue() == json.dumps(list(records), indent=2, ensure_ascii=False) + "\n"


#: Measures, in a fresh Python, the memory an export takes of the store given (to a stream
#: that keeps only a count), after one untimed run: imports and caches never count.
MEMORY_PROBE = """
import json, os, sys, tracemalloc
from kexp import Store
from kexp.cli.main import main
from kexp.output.export import export

class Counted:
    written = 0
    def write(self, text):
        self.written += len(text)

store = Store(sys.argv[1])
peaks = {}
for output_format in ("json", "jsonl", "csv"):
    export(store, Counted(), output_format)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    out = Counted()
    count = export(store, out, output_format)
    peaks[output_format] = [tracemalloc.get_traced_memory()[1] - before, count, out.written]
    tracemalloc.stop()
    # the command, to a file (-o): what it writes is not held either
    target = sys.argv[2] + "." + output_format
    command = ["--root", sys.argv[1], "export", "--format", output_format, "-o", target]
    main(command, standalone_mode=False)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    main(command, standalone_mode=False)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    peaks["command " + output_format] = [peak, count, os.path.getsize(target)]
print(json.dumps(peaks))
"""


def test_memory_does_not_grow_with_the_files_texts(repo: Path, store: Store) -> None:
    count = 1500
    fill(repo, count)
    # make each file's text as long as a real one's (about 3.5 kB): the old way kept them
    text = "**Why it worked/failed**: " + "the loads coalesce once unrolled; " * 80 + "\n"
    for path in (repo / "experiments").rglob("*.md"):
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    past_racy_window()  # files settled, as in a store in use: no file is read twice
    probe = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(repo), str(repo / "export")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "KEXP_NO_FORK": "1", "PYTHONHASHSEED": "0"},
    )
    peaks = json.loads(probe.stdout)
    assert len(peaks) == 2 * len(FORMATS)
    for name, (peak, written, size) in peaks.items():
        output_format = name.split()[-1]
        assert written == count, name
        assert size == len(reference_export(store, output_format).encode("utf-8")), name
        # The old way: about 12 kB a file here (the experiment whole, its record, and
        # the text written); now the experiments listed (their front-matter) and the
        # texts of a few hundred files at a time.
        assert peak < count * 3000, (name, peak)


def test_the_command_writes_what_the_library_writes(repo: Path, store: Store) -> None:
    fill(repo, 30)
    for output_format in FORMATS:
        target = repo / f"all.{output_format}"
        run = run_kexp("export", "--format", output_format, "-o", str(target), cwd=repo)
        assert run.returncode == 0, run.stderr
        assert target.read_text(encoding="utf-8") == reference_export(store, output_format)


def test_an_export_that_fails_midway_leaves_the_earlier_file_whole(
    repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written as it is made, the export still replaces its file atomically: a failure
    after some records leaves the file of the earlier export as it was, and no
    temporary file."""
    from click.testing import CliRunner

    from kexp.cli.main import main
    from kexp.output import export as export_module

    fill(repo, 30)
    target = repo / "all.jsonl"
    target.write_text("the earlier export\n", encoding="utf-8")
    made = export_module.to_record

    def failing(exp: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if exp.id.endswith("0a"):
            raise OSError(28, "No space left on device")
        return made(exp, *args, **kwargs)

    monkeypatch.setattr(export_module, "to_record", failing)
    result = CliRunner().invoke(
        main, ["--root", str(repo), "export", "--format", "jsonl", "-o", str(target)]
    )
    assert result.exit_code == 2 and "No space left on device" in result.output, result.output
    assert target.read_text(encoding="utf-8") == "the earlier export\n"
    assert [p.name for p in repo.iterdir() if p.name.endswith(".tmp")] == []
