"""The schema validator kexp runs is generated from schema/experiment.schema.json and
kept in the package (kexp/format/_schema_validator.py): it must describe today's schema."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kexp.format.schema import GENERATED_MODULE, generated_validator_source, schema_path


def test_the_generated_validator_is_of_the_current_schema() -> None:
    header = GENERATED_MODULE.read_text(encoding="utf-8").splitlines()[0]
    recorded = re.search(r"sha256 ([0-9a-f]{64})", header)
    assert recorded is not None, header
    digest = hashlib.sha256(schema_path().read_bytes()).hexdigest()
    assert recorded.group(1) == digest, (
        "schema/experiment.schema.json changed: run `python -m kexp.format.schema` and commit "
        "kexp/format/_schema_validator.py"
    )


def test_regenerating_it_gives_the_same_file() -> None:
    fastjsonschema = pytest.importorskip("fastjsonschema")
    text = GENERATED_MODULE.read_text(encoding="utf-8")
    if f"fastjsonschema {fastjsonschema.VERSION}." not in text.splitlines()[1]:
        pytest.skip("generated with another fastjsonschema version")
    assert generated_validator_source() == text


def test_checking_a_file_needs_neither_fastjsonschema_nor_jsonschema() -> None:
    """A valid file is checked by the generated module alone: no schema compiled."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from kexp.format.validate import read_and_check\n"
        "checked = read_and_check(Path(sys.argv[1]))\n"
        "assert checked.ok, checked.problems\n"
        "print(sorted(m for m in ('fastjsonschema', 'jsonschema') if m in sys.modules))\n"
    )
    example = sorted((Path(__file__).parents[1] / "experiments").glob("*/*/**/*.md"))[0]
    result = subprocess.run(
        [sys.executable, "-c", code, str(example)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
