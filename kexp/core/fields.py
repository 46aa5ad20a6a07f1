"""The field table: one declaration per field of an experiment, and what is derived
from it.

Each :class:`Field` says where the field lies (the front-matter, or a ``## `` section
of the body), its kind of value, whether a file may leave it out, its default, and how
it shows (a hint for a problem, a note in ``kexp new``'s template, whether ``--brief``
keeps it, whether the predecessor's record has it). The front-matter order, the
sections and their headings, the cache rows' values (:mod:`kexp.storage.rows`), the export
shapes (:mod:`kexp.output.export`) and the predecessor's record keys are derived from
:data:`FIELDS`; ``tests/test_fields.py`` checks it against ``schema/*.json`` and
against :class:`kexp.core.model.KernelExperiment`.

Adding a field: declare it here, add it to ``schema/experiment.schema.json`` (then
``python -m kexp.format.schema`` regenerates the validator), and give
:class:`kexp.core.model.KernelExperiment` its attribute (see docs/architecture.md).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

#: Kinds of value: a text, a number, a boolean, a list of texts, a list of numbers, a
#: list of mappings, a mapping.
Kind = Literal["text", "number", "boolean", "texts", "numbers", "records", "mapping"]
#: Each kind's JSON Schema type.
SCHEMA_TYPES: dict[str, str] = {
    "text": "string",
    "number": "number",
    "boolean": "boolean",
    "texts": "array",
    "numbers": "array",
    "records": "array",
    "mapping": "object",
}
#: The JSON Schema type of the items of each list kind.
ITEM_TYPES: dict[str, str] = {"texts": "string", "numbers": "number", "records": "object"}
#: What a JSON value of each kind is, in words.
KIND_WORDS: dict[str, str] = {
    "text": "a string",
    "number": "a number",
    "boolean": "true or false",
    "texts": "a list of strings",
    "numbers": "a list of numbers",
    "records": "a list of objects",
    "mapping": "an object",
}


def is_of_kind(value: Any, kind: str) -> bool:
    """Whether a JSON value is of a kind, as JSON tells them apart: a boolean is no
    number (``true`` is not 1), a number no boolean, a text neither."""
    if kind in ITEM_TYPES:
        item = {"texts": "text", "numbers": "number", "records": "mapping"}[kind]
        return isinstance(value, list) and all(is_of_kind(v, item) for v in value)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    wanted = {"text": str, "boolean": bool, "mapping": dict}[kind]
    return isinstance(value, wanted)


class Field(NamedTuple):
    """One field of an experiment."""

    name: str
    kind: Kind
    #: The ``## `` heading of a body section; "" for a front-matter field.
    heading: str = ""
    #: Whether a file must hold it (the schema's ``required``); body sections never.
    required: bool = False
    #: Its value when absent (a list or mapping: a fresh empty one).
    default: Any = ""
    #: Whether its plain YAML scalars are kept as written (never retyped: ``1e3`` in
    #: an id stays text), and it is searched by ``--text``.
    verbatim: bool = False
    #: Whether its values repeat from file to file (interned in the cache's rows).
    repeats: bool = False
    #: Whether ``--brief`` keeps it.
    brief: bool = False
    #: Whether ``kexp new``'s template offers it.
    template: bool = False
    #: The ``hint:`` of a problem with it (front-matter fields).
    hint: str = ""
    #: The comment ``kexp new``'s template shows above it.
    note: str = ""

    @property
    def in_front_matter(self) -> bool:
        """Whether it lies in the front-matter (else: a body section)."""
        return not self.heading

    def empty(self) -> Any:
        """A fresh default value."""
        return type(self.default)() if isinstance(self.default, (list, dict)) else self.default

    def absent(self) -> Any:
        """Its value in a cache row (:class:`kexp.storage.rows.Row`) when a file leaves it out:
        a list as an empty tuple, a mapping as None."""
        if isinstance(self.default, dict):
            return None
        return tuple(self.default) if isinstance(self.default, list) else self.default


#: Every field, in the file's order: the front-matter in canonical order (the order
#: they are written), then the body sections in order.
FIELDS: tuple[Field, ...] = (
    Field(
        "id",
        "text",
        required=True,
        verbatim=True,
        brief=True,
        template=True,
        hint="ids are 16 lowercase hex digits; let kexp create them (kexp add, create_experiment)",
    ),
    Field(
        "pid",
        "text",
        required=True,
        verbatim=True,
        repeats=True,
        template=True,
        hint="write the parent's full 16-hex id, or pid: '' when there is no parent",
        note="the experiment this one builds on (its code is in your base), or empty for "
        "a first try; an id prefix is fine",
    ),
    Field(
        "change_summary",
        "text",
        required=True,
        verbatim=True,
        brief=True,
        template=True,
        hint="one line of at most 80 characters, '<What> - <Result>'; put the "
        "details in '## Detailed description'",
        note="one line, at most 80 characters: '<What> - <Result>' "
        "(Vectorize bf16 copies to 128-bit - +11.67%) or '<What> - <Why it failed>'",
    ),
    Field(
        "score",
        "number",
        required=True,
        default=0.0,
        brief=True,
        template=True,
        hint="write the speedup ratio as a plain number, e.g. 'score: 1.18' "
        "(0 when nothing could be measured)",
        note="baseline time / candidate time, geometric mean over the configurations "
        "(1.18 = 18% faster); 0 when nothing could be measured, never a guess; "
        "above 3.0: verify correctness first",
    ),
    Field(
        "measured_against",
        "text",
        repeats=True,
        template=True,
        hint="write parent (score is the speedup over the parent experiment's "
        "code) or reference (over the operator's original code)",
        note="what score is a speedup over: parent (the parent's code, the "
        "commit you made the change on: measure each change against it) or reference (the "
        "operator's original code, e.g. a first try). kexp multiplies the steps along the "
        "lineage into the cumulative score, the speedup over the reference, which ranks "
        "the best",
    ),
    Field(
        "score_ci",
        "numbers",
        default=[],
        brief=True,
        hint="write the interval as two numbers around the score, e.g. score_ci: "
        "[1.011, 1.054] (kexp computes it from repeated timings), or remove it",
    ),
    Field(
        "status",
        "text",
        required=True,
        default="new",
        verbatim=True,
        repeats=True,
        template=True,
        hint="use one of: new, running, done, failed, timeout",
        note="done; failed (compile error, crash, wrong results); timeout; new (planned); running",
    ),
    Field(
        "is_buggy",
        "boolean",
        required=True,
        default=False,
        template=True,
        hint="write true or false",
        note="true for a compile error, crash or wrong results: then status failed, "
        "score 0, and fill in '## Error message'",
    ),
    Field(
        "operator_sig",
        "text",
        required=True,
        verbatim=True,
        repeats=True,
        brief=True,
        template=True,
        hint="name the files and kernels affected, e.g. 'csrc/x.cu: my_kernel'",
        note="'path/to/file: kernel_name' for every kernel affected, spelled the "
        "same way each time",
    ),
    Field(
        "dtype_sig",
        "text",
        required=True,
        verbatim=True,
        repeats=True,
        brief=True,
        template=True,
        hint="write the data type, e.g. bf16",
        note="bf16, fp16, fp8, bf16 -> fp8, ...",
    ),
    Field(
        "env",
        "text",
        required=True,
        verbatim=True,
        repeats=True,
        brief=True,
        template=True,
        hint="describe GPU, driver and versions, e.g. 'MI300X, ROCm 7.0.0' (see kexp env)",
        note="GPU model, driver, ROCm/CUDA, framework versions (detected by kexp env)",
    ),
    Field(
        "base_commit",
        "text",
        required=True,
        verbatim=True,
        repeats=True,
        template=True,
        hint="write the full hash of the commit the change was made on (git rev-parse HEAD)",
        note="the commit the change was made on (git HEAD while the change is uncommitted)",
    ),
    Field(
        "created_at",
        "text",
        required=True,
        verbatim=True,
        template=True,
        hint="write a quoted UTC time such as '2026-11-29T15:52:36Z'",
    ),
    Field(
        "tags",
        "texts",
        default=[],
        verbatim=True,
        template=True,
        hint="write a list of short labels, e.g. tags: [cache, unroll]",
        note="technique (unroll, vectorize, split-k) and kernel family, e.g. [cache, unroll]",
    ),
    Field("author", "text", verbatim=True, repeats=True, hint="write a name"),
    Field(
        "combines",
        "texts",
        default=[],
        verbatim=True,
        template=True,
        hint="write a list of full experiment ids, e.g. combines: [6749f3a0c2d41e7b]",
        note="ids of the experiments this one merges (flagged interference when it "
        "scores below the best of them)",
    ),
    Field(
        "protocol",
        "mapping",
        default={},
        template=True,
        hint="write e.g. protocol: {timer: cuda_events, warmup: 10, repetitions: 100, "
        "l2_flushed: true, clocks_locked: false} (timer: cuda_events, hip_events, do_bench, "
        "torch_benchmark, wall_clock or other; synchronized: true/false with a wall clock; "
        "device: gpu or cpu)",
        note="how you timed, what you know of it: {timer: cuda_events (hip_events, "
        "do_bench, torch_benchmark, wall_clock, other), warmup: 10, repetitions: 100, "
        "l2_flushed: true, clocks_locked: false, device: gpu}",
    ),
    Field(
        "results",
        "records",
        default=[],
        hint="write a list of {config: NAME, baseline: US, candidate: US, speedup: X}",
    ),
    Field(
        "detailed_description",
        "text",
        heading="Detailed description",
        template=True,
        note="four paragraphs, always, in this order: Approach (what you "
        "changed, precisely enough to redo it), Result (the numbers; where it helped and "
        "where not), Why it worked/failed (the mechanism, with evidence: registers, "
        "occupancy, bandwidth, bank conflicts), Key insight (one sentence the next person "
        "can act on; kexp lessons shows it). A failure without an explanation teaches "
        "nothing.",
    ),
    Field(
        "raw_result",
        "text",
        heading="Raw result",
        template=True,
        note="the measurement as printed: 'Iteration N Results - "
        "SUCCESS/MARGINAL/REGRESSION:', the **Overall** line, then **Per-kernel "
        "breakdown** with one '- config: ...' item per configuration (a line over 80 "
        "characters wrapped, its continuation indented by two); how it was measured "
        "(runs, median) and the correctness check. kexp add --baseline/--candidate "
        "computes it from timings.",
    ),
    Field(
        "profiling_info",
        "text",
        heading="Profiling info",
        template=True,
        note="profiler evidence for the why: tool and counters (rocprofv3, "
        "Nsight Compute), register counts, occupancy, bandwidth, bank conflicts, spills. "
        "'Not profiled' (and why) is an honest answer.",
    ),
    Field(
        "error_message",
        "text",
        heading="Error message",
        template=True,
        note="only when is_buggy: the error type and message, verbatim (the "
        "compiler or runtime error, the failing assertion with its tolerance)",
    ),
    Field(
        "code_change",
        "text",
        heading="Code change",
        template=True,
        note="the diff (git diff against base_commit), whole; kexp new --diff-from-git fills it in",
    ),
    #: Raw timings per round, written by kexp (see :mod:`kexp.format.samples`).
    Field("samples", "text", heading="Samples"),
)

#: The fields by name.
FIELD = {field.name: field for field in FIELDS}
#: The dataclass's arguments (:class:`kexp.core.model.KernelExperiment`), in order: the
#: predecessor's (its positional calls keep working), then kexp's additions in the
#: order they came. A new field goes at the end.
ARGUMENTS = (
    "score",
    "raw_result",
    "dtype_sig",
    "env",
    "is_buggy",
    "error_message",
    "change_summary",
    "detailed_description",
    "code_change",
    "base_commit",
    "operator_sig",
    "profiling_info",
    "status",
    "id",
    "pid",
    "created_at",
    "tags",
    "author",
    "combines",
    "results",
    "score_ci",
    "protocol",
    "measured_against",
    "samples",
)
#: The predecessor's record keys, as its JSON database holds them (frozen: a new field
#: is kexp's own).
LEGACY_FIELDS = (
    "id",
    "pid",
    "score",
    "raw_result",
    "dtype_sig",
    "env",
    "is_buggy",
    "error_message",
    "change_summary",
    "detailed_description",
    "code_change",
    "base_commit",
    "operator_sig",
    "profiling_info",
    "status",
    "created_at",
)

#: Front-matter fields in canonical order (the order they are written in a file).
FRONT_MATTER_FIELDS = tuple(f.name for f in FIELDS if f.in_front_matter)
#: Front-matter fields that may be left out of a file (empty when absent).
OPTIONAL_FIELDS = frozenset(f.name for f in FIELDS if f.in_front_matter and not f.required)
#: Body fields in canonical order, with their ``## `` section headings.
SECTION_HEADINGS = {f.name: f.heading for f in FIELDS if not f.in_front_matter}
BODY_FIELDS = tuple(SECTION_HEADINGS)
ALL_FIELDS = FRONT_MATTER_FIELDS + BODY_FIELDS
#: Front-matter fields whose plain scalars are kept as written (never retyped by YAML).
STRING_FIELDS = frozenset(f.name for f in FIELDS if f.verbatim)
#: The texts ``--text`` searches (then the body sections and the preamble).
SEARCHED_FIELDS = tuple(f.name for f in FIELDS if f.verbatim and f.kind == "text")
#: The stored fields ``--brief`` keeps.
BRIEF_STORED = tuple(f.name for f in FIELDS if f.brief)
#: Fields whose values are lists.
LIST_FIELDS = frozenset(f.name for f in FIELDS if f.kind in ITEM_TYPES)
#: Fields whose values are lists of texts, mappings, and numbers: as such they are
#: typed (``--set``, CSV cells).
TEXT_LIST_FIELDS = frozenset(f.name for f in FIELDS if f.kind == "texts")
JSON_FIELDS = frozenset(f.name for f in FIELDS if f.kind in ("numbers", "records", "mapping"))
MAPPING_FIELDS = frozenset(f.name for f in FIELDS if f.kind == "mapping")
NUMBER_FIELDS = frozenset(f.name for f in FIELDS if f.kind == "number")
BOOLEAN_FIELDS = frozenset(f.name for f in FIELDS if f.kind == "boolean")
#: How to fix each front-matter field, shown as the ``hint:`` line of a problem.
FIELD_HINTS = {f.name: f.hint for f in FIELDS if f.in_front_matter and f.hint}
