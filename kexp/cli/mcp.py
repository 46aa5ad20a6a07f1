"""kexp's tools for agents, over the Model Context Protocol: ``kexp mcp``.

A stdio MCP server on the official SDK (``pip install "kexp[mcp]"``). Each tool is one
library call, as each command is, and answers what the command prints with ``--json``:

========== ============================================ ================================
tool       library call                                 the command
========== ============================================ ================================
consult    :func:`kexp.agents.context.context`                ``kexp context``
similar    :func:`kexp.storage.retrieval.similar`               ``kexp similar --json``
top        :meth:`kexp.Store.top_experiments`           ``kexp top --json --brief``
list       :func:`kexp.output.export.listed_experiments` ``kexp list --json --brief``
show       :meth:`kexp.Store.get_experiment`            ``kexp show ID --json``
lessons    :func:`kexp.agents.lessons.lesson_report`           ``kexp lessons --json``
tree       :mod:`kexp.storage.lineage`                          ``kexp tree --json``
record     :func:`kexp.measure.intake.record`                   ``kexp add``
remeasure  :func:`kexp.measure.remeasure.remeasure`               ``kexp remeasure --json``
update     :func:`kexp.measure.corrections.apply_correction`    ``kexp update --reason``
sync       :func:`kexp.storage.sync.sync`                    ``kexp sync --json``
========== ============================================ ================================

The store is ``--root``, else ``$KEXP_ROOT``, else found from the server's working
directory (the nearest folder above it holding ``experiments/``). A kexp error (a bad
score, an unknown id, no store) is a tool error carrying kexp's one-line message, its
advice naming the tools' arguments, not the command's flags (:mod:`kexp.core.advice`); so is
an argument that is unknown (a typo), missing or of another JSON type than its schema's
(``score: true``, ``"1.2"``: never converted), naming it and what it must be (nothing is
done). The server goes on answering. Warnings (a repeated change,
timings without raw samples, a suspect measurement) come back as more text after the
result, ``kexp: warning: ...``. Calls run one at a time. The read tools take ``refs``
(patterns such as ``origin/*``) and ``all_refs``, as the commands take ``--refs`` and
``--all-refs``: the store is read with every matching ref, one entry per experiment (its
newest version, with where it was found), so that an agent that only fetched sees what
the others synced; ``record`` takes them too, to warn of a change tried there.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    CallToolResult,
    ToolAnnotations,
)
from pydantic import Field

from kexp.agents.context import context
from kexp.agents.lessons import lesson_report
from kexp.cli.commands.common import needs_bodies
from kexp.cli.mcpcalls import ToolCalls, ToolServer
from kexp.core.advice import for_tools
from kexp.core.errors import KexpError, KexpWarning
from kexp.core.inputs import read_input_text
from kexp.core.model import OUTCOMES, STATUSES
from kexp.core.version import __version__
from kexp.measure.corrections import apply_correction, checked_changes
from kexp.measure.envinfo import detected_env
from kexp.measure.intake import record as write
from kexp.measure.intake import take_git_diff
from kexp.measure.remeasure import remeasure as add_round
from kexp.output.export import (
    check_fields,
    listed_experiments,
    measured_record,
    written_record,
)
from kexp.output.replies import experiment_reply, lessons_reply, tree_reply
from kexp.output.treerows import DEFAULT_ROWS, tree_rows
from kexp.storage import lineage
from kexp.storage.retrieval import similar as find_similar
from kexp.storage.sync import sync as publish
from kexp.storage.unread import unread_fetched

__all__ = ["INSTRUCTIONS", "TOOLS", "build_server", "serve"]

#: What the server tells a client about itself.
INSTRUCTIONS = (
    "The history of GPU kernel optimization experiments (kexp). Before changing a "
    "kernel, call consult (operator, dtype, env, your plan, and all_refs: true to read "
    "what other agents synced, as of your last git fetch or sync); after measuring, call "
    "record with baseline and candidate timings (failures too), diff_from_git: true "
    "(your change, read from git: what was tried before is then warned of, with all_refs: "
    "true what other agents synced too) and pid, the id of the "
    "experiment your change builds on (consult's current best: steps multiply into the "
    "cumulative score); correct with update or remeasure; share with sync. "
    "Ids: give one as a tool printed it (10 characters, more where two ids share them)."
)
#: The tool names, in the order they are listed.
TOOLS = (
    "consult",
    "similar",
    "top",
    "list",
    "show",
    "lessons",
    "tree",
    "record",
    "remeasure",
    "update",
    "re_id",
    "sync",
)

#: Timings: an object {config: time or [samples]} (in ``unit``), or the path of a file.
Timings = Annotated[
    dict[str, float | list[float]] | str | None,
    Field(
        description="Timings per configuration: a JSON object {config: time or [samples]} "
        "in `unit`, or the path of a timings file (plain JSON, do_bench lists, "
        "pytest-benchmark, torch.utils.benchmark JSON, KernelBench, nsys stats CSV, "
        "config,time CSV; relative to the server's folder, else the store's)"
    ),
]
Unit = Annotated[
    Literal["ns", "us", "ms", "s"] | None,
    Field(
        description="Unit of inline or plain-file timings (do_bench gives ms); us when not "
        "given, and then times under 2 us are refused until it is"
    ),
]
Operator = Annotated[str | None, Field(description="Operator/file substring, e.g. rms_norm")]
Dtype = Annotated[str | None, Field(description="Data type substring, e.g. bf16")]
Env = Annotated[str | None, Field(description="Environment substring, e.g. MI300X")]
Text = Annotated[str | None, Field(description="Substring of any field")]
Outcomes = Annotated[list[str] | None, Field(description="Any of " + ", ".join(OUTCOMES))]
Statuses = Annotated[list[str] | None, Field(description="Any of " + ", ".join(STATUSES))]
Tags = Annotated[list[str] | None, Field(description="Tags that must be present")]
Brief = Annotated[bool, Field(description="What it takes to decide, no long text")]
ExpId = Annotated[
    str, Field(description="Experiment id or unique prefix, as printed (10+ characters)")
]
Refs = Annotated[
    list[str] | None,
    Field(description="Read the store at these refs too, e.g. origin/* (kexp --refs)"),
]
AllRefs = Annotated[
    bool,
    Field(description="Read every branch and remote-tracking branch too: what others synced"),
]
_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def build_server(root: Path | str | None = None) -> MCPServer[Any]:
    """The MCP server with kexp's tools, on the store at ``root`` (None: ``$KEXP_ROOT``
    or the nearest folder above the working directory holding ``experiments/``)."""
    tools = ToolCalls(Path(root) if root is not None else None)
    server = ToolServer("kexp", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    server.resolve = tools.resolve

    @server.register(_READ)
    def consult(
        operator: Annotated[str, Field(description="Operator/file substring, e.g. rms_norm")],
        dtype: Dtype = None,
        env: Env = None,
        plan: Annotated[str | None, Field(description="What you plan to try, in words")] = None,
        diff: Annotated[str | None, Field(description="Your planned change, as a diff")] = None,
        budget: Annotated[int, Field(ge=1, description="Most tokens (4 characters)")] = 4000,
        format: Literal["markdown", "json"] = "markdown",
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """What to read before the next iteration on an operator, in one packet: the
        current best and its lineage, related failures and successes with their key
        insights, what was already tried, what was never tried (kexp context)."""

        def run() -> str:
            packet = context(
                tools.store(refs, all_refs),
                operator=operator,
                dtype=dtype,
                env=env,
                text=plan,
                diff=diff,
                budget=budget,
                output=format,
            )
            return for_tools(packet.text.rstrip("\n"))

        return tools.answer(run)

    @server.register(_READ)
    def similar(
        text: Annotated[str | None, Field(description="A plan or idea, in words")] = None,
        diff: Annotated[str | None, Field(description="A code change, as a diff")] = None,
        exp_id: Annotated[str | None, Field(description="An experiment's id")] = None,
        operator: Operator = None,
        dtype: Dtype = None,
        env: Env = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """The experiments most related to a plan, a diff or an experiment, best first
        (kexp similar --json)."""
        return tools.answer(
            lambda: [
                match.to_dict()
                for match in find_similar(
                    tools.store(refs, all_refs),
                    text=text,
                    diff=diff,
                    exp_id=exp_id,
                    limit=limit,
                    operator=operator,
                    dtype=dtype,
                    env=env,
                )
            ]
        )

    @server.register(_READ)
    def top(
        limit: Annotated[
            int | None,
            Field(ge=1, le=1000, description="How many (default: the setting top_default, 20)"),
        ] = None,
        operator: Operator = None,
        dtype: Dtype = None,
        env: Env = None,
        text: Text = None,
        outcome: Outcomes = None,
        tags: Tags = None,
        min_score: float | None = None,
        by: Annotated[
            Literal["cumulative", "score", "low"],
            Field(
                description="cumulative: the speedup over the reference (the best tips); "
                "score: one step; low: the cumulative 95% interval's low end"
            ),
        ] = "cumulative",
        include_buggy: bool = False,
        include_pending: bool = False,
        brief: Brief = True,
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """The best experiments by cumulative score, the steps that improved first (the
        first is the best tip), buggy, failed (nothing measured), pending and controls
        left out (kexp top --json --brief)."""
        filters = _filters(
            operator=operator, dtype=dtype, env=env, text=text, outcome=outcome, tags=tags
        )
        if min_score is not None:
            filters["min_score"] = min_score

        def run() -> list[dict[str, Any]]:
            found = tools.store(refs, all_refs).top_experiments(
                limit,
                include_buggy=include_buggy,
                include_pending=include_pending,
                by=by,
                **filters,
            )
            return [experiment_reply(exp, brief=brief) for exp in found]

        return tools.answer(run)

    @server.register(_READ, name="list")
    def list_experiments(
        operator: Operator = None,
        dtype: Dtype = None,
        env: Env = None,
        text: Text = None,
        outcome: Outcomes = None,
        status: Statuses = None,
        tags: Tags = None,
        is_buggy: Annotated[bool | None, Field(description="Only (not) buggy")] = None,
        pid: Annotated[str | None, Field(description="Parent id (or unique prefix)")] = None,
        min_score: float | None = None,
        max_score: float | None = None,
        since: Annotated[str | None, Field(description="Created at or after (date)")] = None,
        until: Annotated[str | None, Field(description="Created at or before (date)")] = None,
        base_commit: Annotated[
            str | None, Field(description="Base commit: a hash prefix or a revision")
        ] = None,
        sort: Annotated[
            str | None, Field(description="Sort by this field (a leading '-': descending)")
        ] = None,
        reverse: bool = False,
        limit: Annotated[
            int | None,
            Field(ge=0, description="At most this many: the newest, or the first sorted"),
        ] = None,
        brief: Brief = True,
        fields: Annotated[list[str] | None, Field(description="Only these fields")] = None,
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """Every experiment matching the filters, oldest first (or sorted), each brief
        unless asked otherwise; the ids to give show, tree, similar (kexp list --json
        --brief)."""
        filters = _filters(
            operator=operator, dtype=dtype, env=env, text=text, outcome=outcome,
            status=status, tags=tags, is_buggy=is_buggy, pid=pid, min_score=min_score,
            max_score=max_score, since=since, until=until, base_commit=base_commit,
        )  # fmt: skip

        def run() -> list[dict[str, Any]]:
            chosen = check_fields(fields, where=True) if fields else None
            found = listed_experiments(
                tools.store(refs, all_refs), sort=sort, reverse=reverse, limit=limit,
                brief=not needs_bodies("json", True, ",".join(fields or ()) or None, False),
                **filters,
            )  # fmt: skip
            return [experiment_reply(exp, chosen, brief=brief) for exp in found]

        return tools.answer(run)

    @server.register(_READ)
    def show(
        exp_id: ExpId,
        brief: Annotated[bool, Field(description="What it takes to decide, no long text")] = False,
        fields: Annotated[list[str] | None, Field(description="Only these fields")] = None,
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """One experiment, every field (kexp show ID --json); read across refs, its
        newest version and where it was found (one the working tree does not hold: an
        error naming the refs that do)."""

        def run() -> dict[str, Any]:
            chosen = check_fields(fields, where=True) if fields else None
            store = tools.store(refs, all_refs)
            exp = store.get_experiment(exp_id)  # one on a branch alone: the error says which
            return experiment_reply(exp, chosen, brief=brief)

        return tools.answer(run)

    @server.register(_READ)
    def lessons(
        operator: Operator = None,
        dtype: Dtype = None,
        env: Env = None,
        text: Text = None,
        groups: Annotated[
            list[Literal["buggy", "failed", "regression", "marginal", "interference"]] | None,
            Field(description="Only these groups"),
        ] = None,
        limit: Annotated[int | None, Field(ge=0, description="The newest N a group")] = None,
        refs: Refs = None,
        all_refs: AllRefs = False,
    ) -> CallToolResult:
        """The failures to learn from, grouped buggy, failed, regression, marginal,
        interference, each with its key insight (kexp lessons --json)."""

        def run() -> dict[str, Any]:
            filters = _filters(operator=operator, dtype=dtype, env=env, text=text)
            report = lesson_report(tools.store(refs, all_refs), **filters)
            return lessons_reply(report, groups or (), limit)

        return tools.answer(run)

    @server.register(_READ)
    def tree(
        exp_id: Annotated[
            str | None, Field(description="An experiment: its ancestors and descendants")
        ] = None,
        operator: Operator = None,
        dtype: Dtype = None,
        env: Env = None,
        refs: Refs = None,
        all_refs: AllRefs = False,
        brief: Annotated[
            bool, Field(description="Flat rows (depth, scores, mark); false: nested trees")
        ] = True,
        limit: Annotated[
            int, Field(ge=1, description="Most rows when brief (best path and dead ends first)")
        ] = DEFAULT_ROWS,
    ) -> CallToolResult:
        """The lineage (experiments linked by pid): one row per experiment with its depth,
        score (the step over its parent, as kexp tree's step column), cumulative score,
        outcome and mark (best, on the best path, dead end), at most limit, the rows left
        out counted; brief: false, the nested trees with the delta vs parent (kexp tree
        --json)."""
        filters = _filters(operator=operator, dtype=dtype, env=env)

        def run() -> Any:
            store = tools.store(refs, all_refs)
            if exp_id is not None:
                if filters:
                    raise KexpError("give an exp_id or filters, not both")
                forest = [lineage.lineage_of(store, exp_id)]
            else:
                forest = lineage.lineage_forest(store, **filters)
            return tree_rows(forest, limit) if brief else tree_reply(forest)

        return tools.answer(run)

    @server.register(_WRITE)
    def record(
        change_summary: Annotated[
            str, Field(description="One line of at most 80: '<What> - <Result>'")
        ],
        operator_sig: Annotated[
            str,
            Field(
                description="Files/kernels changed: 'path/to/file.cu: kernel' (with a pid: "
                "the parent's when not given)"
            ),
        ] = "",
        dtype_sig: Annotated[
            str, Field(description="bf16, fp16, fp8, ... (with a pid: the parent's when not given)")
        ] = "",
        env: Annotated[
            str | None,
            Field(description="GPU, driver, versions (or detect_env; with a pid: the parent's)"),
        ] = None,
        detect_env: Annotated[
            bool, Field(description="Fill env from this machine (kexp env)")
        ] = False,
        baseline: Timings = None,
        candidate: Timings = None,
        table: Annotated[
            str | None, Field(description="One CSV with config,baseline,candidate columns")
        ] = None,
        unit: Unit = None,
        kernel: Annotated[
            str | None,
            Field(
                description="The kernel to score of an nsys kernel summary (and of ncu "
                "profiling) holding several: its name as printed, its base name "
                "(softmax_fwd), or a part of it"
            ),
        ] = None,
        score: Annotated[
            float | None,
            Field(description="Speedup ratio, only without timings (0: nothing measured)"),
        ] = None,
        status: Literal["new", "running", "done", "failed", "timeout"] = "done",
        is_buggy: bool = False,
        pid: Annotated[str, Field(description="The experiment this one builds on")] = "",
        measured_against: Annotated[
            Literal["parent", "reference"] | None,
            Field(
                description="What the baseline was: the parent's code (the default with a "
                "pid) or the operator's original code (reference)"
            ),
        ] = None,
        base_commit: Annotated[
            str | None, Field(description="Commit the change was made on (default HEAD)")
        ] = None,
        tags: list[str] | None = None,
        combines: Annotated[
            list[str] | None, Field(description="Ids of experiments this one merges")
        ] = None,
        detailed_description: Annotated[
            str,
            Field(
                description="**Approach**, **Result**, **Why it worked/failed**, "
                "**Key insight** paragraphs"
            ),
        ] = "",
        raw_result: str = "",
        profiling_info: Annotated[
            str, Field(description="Profiler evidence (ncu --csv output becomes a table)")
        ] = "",
        profiling_file: Annotated[
            str | None, Field(description="A file of profiler output (e.g. ncu --csv)")
        ] = None,
        error_message: Annotated[str, Field(description="Required when is_buggy")] = "",
        code_change: Annotated[
            str, Field(description="The diff (or diff_from_git: read from git)")
        ] = "",
        diff_from_git: Annotated[
            bool,
            Field(
                description="code_change: the git diff of the working tree against "
                "base_commit (HEAD when not given; a change committed since: give the "
                "commit it was made on), as kexp add --diff-from-git"
            ),
        ] = False,
        protocol: Annotated[
            dict[str, Any] | None,
            Field(
                description="How it was timed: {timer, warmup, repetitions, l2_flushed, "
                "clocks_locked, synchronized, device}"
            ),
        ] = None,
        keep_samples: bool = True,
        refs: Annotated[
            list[str] | None,
            Field(description="Warn of a change tried on these refs too, e.g. origin/*"),
        ] = None,
        all_refs: Annotated[
            bool,
            Field(description="Warn of a change tried on any branch: what others synced"),
        ] = False,
    ) -> CallToolResult:
        """Record one iteration (failures too): with baseline and candidate timings the
        score, results and raw_result are computed (an interval from repeated timings);
        without them give score. With a pid, operator_sig, dtype_sig and env not given
        are the parent's. Give the change (diff_from_git: true reads it from git, or
        code_change): a change tried before, here or (all_refs) synced by another
        agent, is warned of. Returns id, path, score, interval, outcome, cumulative
        score (kexp add --json)."""

        def run() -> dict[str, Any]:
            if not pid.strip():  # without a parent, nothing to take them from
                missing = [
                    name
                    for name, value in (("operator_sig", operator_sig), ("dtype_sig", dtype_sig))
                    if not value.strip()
                ]
                if missing:
                    raise KexpError(
                        f"give {' and '.join(missing)} (what the change is on), or the pid of "
                        "the experiment it builds on (its operator, dtype and env are then "
                        "taken)"
                    )
            fields: dict[str, Any] = {
                "change_summary": change_summary,
                "operator_sig": operator_sig,
                "dtype_sig": dtype_sig,
                "status": status,
                "is_buggy": is_buggy,
                "pid": pid,
                "detailed_description": detailed_description,
                "raw_result": raw_result,
                "profiling_info": profiling_info,
                "error_message": error_message,
                "code_change": code_change,
            }
            optional = {
                "env": env,
                "score": score,
                "measured_against": measured_against,
                "base_commit": base_commit,
                "tags": tags,
                "combines": combines,
                "protocol": protocol,
            }
            fields.update({k: v for k, v in optional.items() if v is not None})
            if score is None and baseline is None and candidate is None and table is None:
                raise KexpError(  # (a client sends a number JSON cannot hold as null)
                    "score must be a finite number, and none was given (1e400 arrives as "
                    "null): give it, or baseline and candidate timings (or a table); score 0 "
                    "when nothing could be measured (a crash, a timeout, wrong results)"
                )
            store = tools.store(refs, all_refs)
            if diff_from_git:
                if code_change:
                    raise KexpError("give code_change or diff_from_git, not both")
                take_git_diff(store, fields)
            if profiling_file is not None:
                fields["profiling_info"] = read_input_text(
                    tools.path(profiling_file), "the profiling file"
                )
            if detect_env and not env:
                fields["env"] = detected_env()
            exp = write(
                store,
                fields,
                baseline=tools.timings(baseline),
                candidate=tools.timings(candidate),
                table=tools.path(table) if table else None,
                unit=unit,
                keep_samples=keep_samples,
                kernel=kernel,
                profiling_file=profiling_file,
            )
            if (unread := unread_fetched(store)) is not None:  # tried before: not looked at
                said = f"a change tried before was looked for in this checkout alone; {unread}"
                warnings.warn(said, KexpWarning, stacklevel=1)
            return measured_record(exp)

        return tools.answer(run)

    @server.register(_WRITE)
    def remeasure(
        exp_id: ExpId,
        baseline: Timings = None,
        candidate: Timings = None,
        table: Annotated[
            str | None, Field(description="One CSV with config,baseline,candidate columns")
        ] = None,
        unit: Unit = None,
        reason: Annotated[str | None, Field(description="Why (a default says the round)")] = None,
        replace_round: Annotated[
            int | None,
            Field(
                ge=1,
                description="Replace this round (1, 2, ...: files swapped, taken under load) "
                "instead of pooling; needs a reason and the file committed",
            ),
        ] = None,
    ) -> CallToolResult:
        """Add a round of measurement (same configurations, measured the same way) to an
        experiment: pooled with every earlier round, score and interval recomputed, the
        correction recorded; or replace a round that was wrong (replace_round, with the
        reason; it stays in git history). No best-of-N (kexp remeasure --json)."""
        return tools.answer(
            lambda: measured_record(
                add_round(
                    tools.store(),
                    exp_id,
                    baseline=tools.timings(baseline),
                    candidate=tools.timings(candidate),
                    table=tools.path(table) if table else None,
                    unit=unit,
                    reason=reason,
                    replace_round=replace_round,
                )
            )
        )

    @server.register(_WRITE)
    def update(
        exp_id: ExpId,
        changes: Annotated[
            dict[str, Any],
            Field(
                description='Fields and their new values, e.g. {"score": 1.021} or '
                '{"is_buggy": true, "error_message": "..."}'
            ),
        ],
        reason: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Why: kept in a dated correction note (old -> new); optional, "
                "as kexp update's --reason",
            ),
        ] = None,
    ) -> CallToolResult:
        """Correct fields of an experiment (validated; only the changed lines rewritten;
        with a reason, a dated note old -> new added; a new score restates the summary's
        figure and drops the old score_ci unless one is given). Returns id, path and the
        fields changed (kexp update [--reason] --json)."""

        def run() -> dict[str, Any]:
            if reason is not None and not reason.strip():
                raise KexpError("give the reason of the correction, or none")
            exp, changed = apply_correction(tools.store(), exp_id, checked_changes(changes), reason)
            return written_record(exp, changed=changed)

        return tools.answer(run)

    @server.register(_WRITE)
    def re_id(
        path: Annotated[str, Field(min_length=1, description="The experiment file")],
        force: Annotated[
            bool, Field(description="Go ahead even when other experiments build on the file")
        ] = False,
    ) -> CallToolResult:
        """Give one of two files holding one id (a copied file, or two branches that made
        the same id, read across refs) a fresh id and the file name that goes with it;
        refused, unless forced, while others build on that file (kexp re-id)."""

        def run() -> dict[str, str]:
            done = tools.store().re_id(tools.path(path), force=force)
            old = {"old_id": done.old_id, "old_path": str(done.old_path)}
            return {**old, "id": done.id, "path": str(done.path)}

        return tools.answer(run)

    @server.register(_WRITE)
    def sync(
        branch: Annotated[
            str | None, Field(description="Publish to this branch, e.g. kexp/<your-name>")
        ] = None,
        remote: str = "origin",
        message: Annotated[str | None, Field(description="The commit message")] = None,
        dry_run: Annotated[
            bool,
            Field(description="Say what would be committed, removed, made, merged and pushed"),
        ] = False,
    ) -> CallToolResult:
        """Share experiments: commit experiments/ only, fetch, merge what others pushed,
        push (never forced) (kexp sync --json)."""
        return tools.answer(
            lambda: publish(
                tools.store(), branch=branch, remote=remote, message=message, dry_run=dry_run
            ).to_dict(for_tools)
        )

    return server


def _filters(**given: Any) -> dict[str, Any]:
    """The query filters given (None and empty lists left out)."""
    return {name: value for name, value in given.items() if value not in (None, [], "")}


def serve(root: Path | str | None = None) -> None:
    """Serve kexp's tools over stdio until the client closes the connection."""
    build_server(root).run("stdio")
