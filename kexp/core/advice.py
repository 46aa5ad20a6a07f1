"""Advice that names the command's options, and the same advice as the MCP tools take it.

A message of the library that tells its reader what to run next in the command's words
(``kexp list --all-refs shows the ids``) takes them from an :class:`Advice` here, which
also holds them in the words of an MCP client, who has tools' arguments, not flags
(``tree with all_refs: true shows the ids``). The command prints the message as it is;
the MCP server says every message through :func:`for_tools`, which puts the tools'
words in place of each piece of advice. One table, so that a new message that names a
flag gets its tools' words beside it (``tests/test_mcp_replies.py`` checks that every
message of the library naming a flag of ``kexp`` is written here)."""

from __future__ import annotations

import dataclasses
import re
from functools import cache

__all__ = ["ADVICE", "Advice", "for_tools"]

#: What a field of an advice (``{id}``, ``{n}``) matches in a message: one word.
_FIELD = r"[^\s()'\";,]+"


@dataclasses.dataclass(frozen=True)
class Advice:
    """One piece of advice: in the command's words and in the MCP tools' words, each a
    template whose ``{fields}`` (ids, numbers) are the same in both."""

    command: str
    tools: str

    def __str__(self) -> str:
        return self.command

    def say(self, **values: object) -> str:
        """The command's words, with the fields' ``values``."""
        return self.command.format(**values)

    def pattern(self) -> re.Pattern[str]:
        """What the command's words, fields filled in, look like in a message."""
        return _pattern(self.command)

    def for_tools(self, text: str) -> str:
        """``text`` with this advice in the tools' words."""
        return self.pattern().sub(lambda m: self.tools.format(**m.groupdict()), text)


@cache
def _pattern(template: str) -> re.Pattern[str]:
    """A command's words (``{field}`` a word) as a pattern."""
    pieces = re.split(r"\{(\w+)\}", template)  # literal, field, literal, ...
    seen: set[str] = set()
    parts = []
    for at, piece in enumerate(pieces):
        if not at % 2:
            parts.append(re.escape(piece))
        elif piece in seen:  # a field said again is the same word
            parts.append(f"(?P={piece})")
        else:
            seen.add(piece)
            parts.append(f"(?P<{piece}>{_FIELD})")
    return re.compile("".join(parts))


#: Advice on two files holding one id (a copied file, or two branches that made the same
#: id): the command that gives one of them a fresh id.
RE_ID = Advice("kexp re-id {path}", 'the re_id tool with path: "{path}"')
#: Advice on a re-id refused because experiments build on the file: going ahead all the
#: same (their ``pid`` or ``combines`` then names no experiment, or the other file's).
RE_ID_FORCE = Advice(
    "kexp re-id --force {path}", 'the re_id tool with path: "{path}" and force: true'
)
#: Advice on ids not found across refs (:meth:`kexp.storage.reader.StoreReader.resolve_id`).
ALL_REFS_IDS = Advice(
    "kexp list --all-refs shows the ids", "the list tool with all_refs: true shows the ids"
)
#: Advice on where the ids (the experiments) are listed: unknown ids, a wrong parent.
LIST_SHOWS = Advice("kexp list shows", "the list tool shows")
#: Advice on an experiment on other refs, not in the working tree (``kexp show ID``,
#: ``kexp tree ID``, ``kexp similar ID``): the same question read across refs.
SHOW_ALL_REFS = Advice(
    "read it there: the same command with --all-refs",
    "read it there: call this tool again with all_refs: true",
)
#: Advice on an experiment on other refs asked for by ``kexp log ID``: its history as the
#: ref holding it has it (no MCP tool reads a history; ``show`` reads the experiment).
LOG_REV = Advice(
    "read its history there with kexp log --rev {ref} {id}",
    'read it there: call show with exp_id: "{id}" and all_refs: true (its history: kexp '
    "log, which no tool is, on {ref})",
)
#: Advice under ``kexp log ID`` when other refs hold commits of the experiment that the
#: history read lacks (a teammate's correction, fetched): the log that shows them.
LOG_ALL_REFS = Advice(
    "kexp log {id} --all-refs shows them",
    'show with exp_id: "{id}" and all_refs: true shows the newest version (its history '
    "across refs: kexp log, which no tool is)",
)
#: Advice on an experiment a commit of the working tree's branch removed, asked for by id
#: across refs: its history, which ends with that commit (``kexp log ID``).
LOG_REMOVED = Advice(
    "its history, up to the removal: kexp log {id}",
    "its history, up to the removal: kexp log {id}, which no tool is",
)
#: Advice on an experiment a newer branch removed, asked for by id across refs: the
#: working tree's copy, read without refs.
READ_WITHOUT_REFS = Advice(
    "without --all-refs or --refs, kexp reads your working tree's copy",
    "without all_refs or refs, the tools read your working tree's copy",
)
#: Advice on an experiment a write names that is on the remote's branch, not in the
#: working tree (a pid another agent synced): the merge kexp sync makes (git merge
#: refuses while files a side branch published are untracked here, alike on it).
MERGE_SYNCED = Advice(
    "merge it in first (kexp sync, which merges {ref}) and run this again",
    "merge it in first: call sync (it merges {ref}), then call this tool again",
)
#: The same merge as a step of other advice (``kexp sync, which merges origin/main, then
#: kexp remeasure ...``): what brings in an experiment the remote's branch holds.
SYNC_MERGES = Advice("kexp sync, which merges {ref}", "call sync (it merges {ref})")
#: Advice on a sync stopped by a conflict with the remote's branch: the ``command`` that
#: merges it by hand in the checkout (:func:`kexp.storage.syncclash.merge_by_hand`; ``git
#: merge`` refuses while files that branch holds alike are untracked here, so they go
#: first, and the merge brings them back).
MERGE_BY_HAND = Advice(
    "merge by hand ({command}), keep the right version, commit, and run kexp sync again",
    "merge by hand in the checkout ({command}), keep the right version, commit, and call "
    "sync again",
)
#: Advice under a sync of the checked-out branch stopped by the same experiment corrected
#: on both sides: how to share the experiments meanwhile (a side branch, read across refs).
SHARE_MEANWHILE = Advice(
    "meanwhile kexp sync --branch kexp/<name> publishes your experiments for the others "
    "to read across refs",
    'meanwhile call sync with branch: "kexp/<name>" to publish your experiments for the '
    "others to read across refs",
)
#: Advice on experiments published with --branch that another clone changed there since.
SETTLE_BESIDE = Advice(
    "to publish your version over {ref}'s, run {keep} and kexp sync --branch {branch} "
    "again; to take theirs instead, run {take} and the same sync again",
    "to publish your version over {ref}'s, run {keep} in the checkout and call sync with "
    "branch {branch} again; to take theirs instead, run {take} and the same sync again",
)
#: Advice on experiments corrected here and removed on the remote's branch.
KEEP_REMOVAL = Advice(
    "to keep {ref}'s removal of {files}, run {command} and kexp sync again (to keep the "
    "correction instead, bring it back after that sync: {restore}, and sync again)",
    "to keep {ref}'s removal of {files}, run {command} in the checkout and call sync "
    "again (to keep the correction instead, bring it back after that sync: {restore}, "
    "and call sync again)",
)
#: Advice on experiments removed here and corrected on the remote's branch.
TAKE_CORRECTION = Advice(
    "to take {ref}'s correction of {files}, run {command} and kexp sync again (then kexp "
    "rm it if it is to go: the correction stays in the history)",
    "to take {ref}'s correction of {files}, run {command} in the checkout and call sync "
    "again (then, if it is to go, remove it in the checkout with kexp rm, as no tool "
    "removes, and call sync: the correction stays in the history)",
)
#: Advice on experiments removed here that another clone published to a side branch.
REMOVE_THERE = Advice(
    "kexp rm removed them here alone (a sync removes from a side branch only what this "
    "clone published there); to remove them from {branch} too, run {command}",
    "kexp rm removed them here alone (sync removes from a side branch only what this "
    "clone published there); to remove them from {branch} too, run {command} in the "
    "checkout",
)
#: Advice on uncommitted changes a sync's merge would overwrite in the checkout.
SET_ASIDE = Advice(
    "set your changes aside for kexp sync and bring them back after it ({command})",
    "set your changes aside in the checkout for sync and bring them back after it "
    "({command}, calling sync for its kexp sync)",
)
#: The same for a merge that would publish an invalid experiment.
MERGE_TO_FIX = Advice(
    "merge by hand ({command}), fix it, commit, and run kexp sync again",
    "merge by hand in the checkout ({command}), fix it, commit, and call sync again",
)
#: Advice on emptying an interval that does not hold its score.
EMPTY_SCORE_CI = Advice(
    "kexp update {id} --set score_ci=",
    'the update tool with exp_id: "{id}" and changes: {{"score_ci": []}}',
)
#: Advice on the error message a buggy experiment needs.
ERROR_MESSAGE = Advice(
    "kexp add --error TEXT or --error-file FILE; kexp update --set-file error_message=FILE",
    'record with error_message: "TEXT"; update with changes: {{"error_message": "TEXT"}}',
)
#: Advice on a score that cannot be measured again (no per-configuration timings).
CORRECT_SCORE = Advice(
    "kexp update {id} --set score=SCORE --reason TEXT",
    'the update tool with exp_id: "{id}", changes: {{"score": SCORE}} and a reason',
)
#: Advice on a score its own measurement contradicts (edited by hand): the score put back
#: to what the measurement gives.
RESTORE_SCORE = Advice(
    "kexp update {id} --set score={score} --reason TEXT",
    'the update tool with exp_id: "{id}", changes: {{"score": {score}}} and a reason',
)
#: Advice on a run that measured nothing (it timed out, it failed) and has now run to
#: the end, the same code: what it measured, on the same record.
SET_MEASURED = Advice(
    "kexp update {id} --set score=SCORE --set status=done --reason TEXT",
    'the update tool with exp_id: "{id}", changes: {{"score": SCORE, "status": "done"}} '
    "and a reason",
)
#: Advice on a run that crashed or gave wrong results (buggy), its code fixed and timed:
#: a new experiment on the code it was made on.
RECORD_AGAIN = Advice(
    "kexp add --pid {pid} --summary TEXT --operator OP --dtype DTYPE --env ENV "
    "--baseline F --candidate F",
    'the record tool with pid: "{pid}", change_summary, operator_sig, dtype_sig, env, '
    "baseline and candidate",
)
#: The same, for a run made on the reference code (no parent).
RECORD_AGAIN_ROOT = Advice(
    "kexp add --summary TEXT --operator OP --dtype DTYPE --env ENV --baseline F --candidate F",
    "the record tool with change_summary, operator_sig, dtype_sig, env, baseline and candidate",
)
#: Advice on a measurement repeated as a new experiment.
REMEASURE = Advice(
    "kexp remeasure {id} --baseline ... --candidate ...",
    'the remeasure tool with exp_id: "{id}", baseline and candidate',
)
#: Advice on a round of measurement that was wrong (files swapped, taken under load):
#: the round replaced, its timings kept in git history.
REPLACE_ROUND = Advice(
    "kexp remeasure {id} --replace-round {n} --baseline ... --candidate ... --reason ...",
    'the remeasure tool with exp_id: "{id}", replace_round: {n}, baseline, candidate and reason',
)
#: Advice on the drift between runs that a step's interval does not cover: an A/A
#: control of the env measures it (the same code both sides, tagged control).
RECORD_CONTROL = Advice(
    'kexp add --summary "A/A" --tag control --env ENV --baseline A --candidate B',
    'the record tool with change_summary: "A/A", tags: ["control"], env, baseline and candidate',
)
#: Advice on a measurement repeated as a new experiment, written all the same: the new
#: record removed first (no MCP tool removes one: ``kexp rm`` in the checkout).
REMOVE_NEW = Advice(
    "kexp rm {id} --yes",
    "remove the record just made, {id} (kexp rm in the checkout: no tool removes one)",
)
#: Advice on a run's verdict recorded as a new experiment with the timings of the
#: pending run that holds them: recorded on that run (buggy: its error message in FILE).
SET_BUGGY = Advice(
    "kexp update {id} --set status={status} --set is_buggy=true --set-file error_message=FILE",
    'the update tool with exp_id: "{id}" and changes: {{"status": "{status}", "is_buggy": '
    'true, "error_message": "TEXT"}}',
)
#: The same, for a verdict that is not buggy (a status: done, failed).
SET_STATUS = Advice(
    "kexp update {id} --set status={status} --set is_buggy={buggy}",
    'the update tool with exp_id: "{id}" and changes: {{"status": "{status}", "is_buggy": '
    "{buggy}}}",
)
#: Advice on a step recorded on a parent without ``measured_against``.
MEASURED_AGAINST = Advice(
    "kexp update {id} --set measured_against=parent",
    'the update tool with exp_id: "{id}" and changes: {{"measured_against": "parent"}}',
)
#: Advice on a step on a parent whose baseline was the reference code (the parent's own
#: baseline given again): its score is the speedup over the reference.
SET_REFERENCE = Advice(
    "kexp update {id} --set measured_against=reference",
    'the update tool with exp_id: "{id}" and changes: {{"measured_against": "reference"}}',
)
#: Advice on a root recorded where a campaign is: the parent it most likely builds on.
SET_PARENT = Advice(
    "kexp update {id} --set pid={pid} --set measured_against=parent",
    'the update tool with exp_id: "{id}" and changes: {{"pid": "{pid}", '
    '"measured_against": "parent"}}',
)
#: Advice on a field that holds a stand-in for the predecessor's value (``legacy_<field>``).
CORRECT_FIELD = Advice(
    "kexp update {id} --set {field}=VALUE",
    'the update tool with exp_id: "{id}" and changes: {{"{field}": VALUE}}',
)
#: Advice on a review cut to fit a comment: the command that prints all of it (no MCP
#: tool reviews a branch: its words send the reader to the command line).
REVIEW_WHOLE = Advice(
    "kexp review {base} {head} --max-chars 0",
    "kexp review {base} {head} on the command line, with no bound on its length",
)
#: :data:`REVIEW_WHOLE` of a review of the working tree.
REVIEW_WHOLE_WORKING_TREE = Advice(
    "kexp review {base} --max-chars 0",
    "kexp review {base} on the command line, with no bound on its length",
)
#: :data:`REVIEW_WHOLE` of a review run with ``--root DIR``.
REVIEW_WHOLE_AT = Advice(
    "kexp --root {root} review {base} {head} --max-chars 0",
    "kexp review {base} {head} on the command line in {root}, with no bound on its length",
)
#: :data:`REVIEW_WHOLE_WORKING_TREE` of a review run with ``--root DIR``.
REVIEW_WHOLE_WORKING_TREE_AT = Advice(
    "kexp --root {root} review {base} --max-chars 0",
    "kexp review {base} on the command line in {root}, with no bound on its length",
)
#: Advice on a raw_result left stale by a new score, with no timings to measure again.
SET_RAW_RESULT = Advice(
    "kexp update {id} --set-file raw_result=FILE",
    'the update tool with exp_id: "{id}" and changes: {{"raw_result": "..."}}',
)
#: Advice on a candidate that timed fewer configurations than its baseline: it may have
#: failed there (a crash, wrong results), a failure to record as one, without timings.
RECORD_FAILURE = Advice(
    "kexp add --summary TEXT --score 0 --status failed --buggy --error-file FILE "
    "--operator OP --dtype DTYPE --env ENV (FILE: the error it printed)",
    'the record tool with change_summary, score: 0, status: "failed", is_buggy: true, '
    "error_message (the error it printed), operator_sig, dtype_sig and env",
)
#: Advice on a run recorded done with score 0 (it measured nothing).
SET_FAILED = Advice(
    "kexp update {id} --set status=failed --reason TEXT",
    'the update tool with exp_id: "{id}", changes: {{"status": "failed"}} and a reason',
)
#: Advice on an uncommitted change measured on HEAD.
BASE_COMMIT_AND_DIFF = Advice(
    "kexp add --base-commit HEAD --diff-from-git",
    'record with base_commit: "HEAD" and diff_from_git: true',
)
#: Advice on a record in a repository with no commits yet.
COMMIT_FIRST = Advice(
    "commit the code first (git add -A && git commit), or give --base-commit HASH",
    'commit the code first (git add -A && git commit), or record with base_commit: "HASH"',
)
#: Advice on a git diff that is not UTF-8 text, saved as such (``change.diff``).
DIFF_FILE = Advice("give --diff-file change.diff", "give its text as code_change")
#: Advice on an untracked file a git diff left out (not source code, or too large):
#: intent to add it (git add -N) takes it in, as it does any file; or the diff given.
TAKE_UNTRACKED = Advice(
    "git add -N PATH takes one in (or give the change with --diff-file change.diff)",
    "git add -N PATH takes one in (or give the change's text as code_change)",
)
#: Advice on profiler output given as timings.
PROFILING_FILE = Advice(
    "kexp add --profiling-file, profiling_file=...", 'record with profiling_file: "PATH"'
)
#: Advice on timings a file gave without their unit, read in one 1000 times too small
#: (triton's do_bench's milliseconds read as microseconds): the experiment removed and
#: recorded again in the larger unit (no MCP tool removes one: kexp rm in the checkout).
RECORD_IN_UNIT = Advice(
    "remove the experiment (kexp rm ID) and record them again in the unit {unit} "
    "(--unit {unit}; unit='{unit}' in Python)",
    'call record again with unit: "{unit}", and remove this experiment (no tool removes '
    "one: kexp rm ID in the checkout, ID the id record answered)",
)
#: Advice on a kernel summary (nsys) or profile (ncu) of several kernels: the one kernel
#: being optimized named, its name as the tool printed it (or a part of it).
PICK_KERNEL = Advice(
    "record with --kernel {kernel} "
    "(in Python: inside kexp.measure.timings.kernel_named('{kernel}'))",
    'record with kernel: "{kernel}"',
)
#: Advice on a kernel named for timings whose configurations are no kernels.
NO_KERNEL = Advice("without --kernel", "without kernel")
#: Advice on timings recorded with no unit stated, refused as too short for microseconds:
#: the same timings recorded again, their unit given.
RECORD_WITH_UNIT = Advice(
    "record them again with --unit {unit} (unit='{unit}' in Python)",
    'call record again with unit: "{unit}"',
)
#: Advice on the unit of timings (a remeasured round in another unit than the record's):
#: the same round given again in that unit (the remeasure tool's ``unit``).
REMEASURE_IN_UNIT = Advice(
    "--unit {unit}; unit='{unit}' in Python", 'call remeasure again with unit: "{unit}"'
)
#: Advice on an environment that could not be detected.
ENV = Advice('--env "MI300X, ROCm 7.0.0"', 'env: "MI300X, ROCm 7.0.0"')
#: Advice on a root recorded without the fields of its campaign (operator, dtype, env):
#: the options that give them.
CAMPAIGN_OPTIONS = Advice(
    "kexp add --operator, --dtype and --env",
    "the record tool's operator_sig, dtype_sig and env",
)
#: Advice on a record without a score: the timings that compute it, or the score itself.
SCORE_OR_TIMINGS = Advice(
    "kexp add --baseline FILE --candidate FILE (or --table FILE), or --score X",
    "baseline and candidate (or table), or score",
)
#: Advice on a timings file given as profiling info: the options that score it.
TIMINGS_FILES = Advice(
    "kexp add --baseline FILE --candidate FILE", "record with baseline and candidate"
)
#: Advice on the remote kexp sync publishes to.
SYNC_REMOTE = Advice("(--remote NAME)", '(remote: "NAME")')
#: Advice on the branch kexp sync publishes to.
SYNC_BRANCH = Advice("(--branch kexp/<name>)", '(branch: "kexp/<name>")')
#: Advice on publishing experiments for review when the checkout's branch holds code.
SYNC_FOR_REVIEW = Advice(
    "publish the experiments for review with kexp sync --branch kexp/<name>",
    'publish the experiments for review: call sync with branch: "kexp/<name>"',
)
#: Advice on publishing a code line a side branch does not hold (the checkout restarted
#: from an earlier commit) as a pull request of its own.
SYNC_NEW_BRANCH = Advice(
    "publish your checkout's code and experiments under a new branch name, a pull "
    "request of their own: kexp sync --branch {branch}",
    "publish the checkout's code and experiments under a new branch name, a pull "
    'request of their own: call sync with branch: "{branch}"',
)
#: Advice on a side branch holding a commit the checkout holds rewritten (amended or
#: rebased with another change): the rewritten line published as a pull request of its own.
SYNC_REWRITTEN = Advice(
    "publish the rewritten line under a new branch name, a pull request of its own (close "
    "the old one, or undo the rewrite and sync again): kexp sync --branch {branch}",
    "publish the rewritten line under a new branch name, a pull request of its own (close "
    'the old one, or undo the rewrite and sync again): call sync with branch: "{branch}"',
)
#: Advice on a side branch whose code the checkout's clashes with (merging them clashes):
#: the checkout's code and the experiments published as a pull request of their own.
SYNC_CODE_CLASHES = Advice(
    "your experiments stay in the working tree: publish them on your checkout's code "
    "under a new branch name, a pull request of their own: kexp sync --branch {branch}",
    "the experiments stay in the working tree: publish them on the checkout's code under "
    'a new branch name, a pull request of their own: call sync with branch: "{branch}"',
)
#: Advice closing the commands that settle a side branch's merge that would publish an
#: invalid experiment (:func:`kexp.storage.syncclash.invalid_beside`).
SYNC_BRANCH_AGAIN = Advice(
    "then run kexp sync --branch {branch} again",
    'then call sync with branch: "{branch}" again',
)
#: Advice on experiments a sync of the default branch held back: published by this clone
#: to a side branch the remote no longer has, and not landed (a pull request closed
#: unmerged; :func:`kexp.storage.published.unlanded`).
PROPOSE_AGAIN = Advice(
    "kexp sync --branch {branch} proposes them again; to drop them, remove the files (kexp rm ID)",
    'calling sync with branch: "{branch}" proposes them again; to drop them, remove the '
    "files in the checkout (kexp rm ID, as no tool removes)",
)
#: Advice on an invalid experiment kexp sync would publish (the remote's branch known).
SYNC_FIX_CHANGED = Advice(
    "fix it (kexp validate --changed {base} lists every problem), then run kexp sync again",
    "fix the file (or correct it with the update tool), then call sync again",
)
#: The same, when the remote has none of the branch (the whole store is checked).
SYNC_FIX_ALL = Advice(
    "fix it (kexp validate lists every problem), then run kexp sync again",
    "fix the file (or correct it with the update tool), then call sync again",
)
#: Advice on the store's folder, which the server is started on.
ROOT = Advice(
    "give --root (KEXP_ROOT) the folder that holds it",
    "start the server on the folder that holds it (kexp mcp --root DIR, or KEXP_ROOT)",
)
#: Advice at kexp skill install --mcp without the MCP SDK beside kexp: the command that
#: installs it into the Python the client's configuration runs (never said to a tool: a
#: server that runs has the SDK).
INSTALL_MCP_SDK = Advice(
    'install it with {python} -m pip install "kexp[mcp]" (kexp mcp needs it)',
    'install it with {python} -m pip install "kexp[mcp]" (kexp mcp needs it)',
)
#: Advice of the MCP server started with a --root that holds no store: the client's
#: configuration is wrong (not the store missing: kexp init there would make a second,
#: empty one).
WRONG_ROOT = Advice(
    "the root is wrong: run kexp skill install --mcp again in the store's folder (it writes "
    "the folder's absolute path)",
    "the root is wrong: the client's configuration must name the store's absolute folder "
    "(kexp mcp --root DIR, or KEXP_ROOT); kexp skill install with its MCP option, run in "
    "that folder, writes it",
)
#: Advice on a client configuration ``kexp skill install --mcp`` writes: it holds this
#: machine's paths (the Python, the store), so each teammate writes their own.
OWN_MCP_CONFIG = Advice(
    "each teammate runs kexp skill install --{client} --mcp in their own checkout",
    "each teammate writes their own, in their checkout: kexp skill install for {client} with "
    "its MCP option (no tool writes it)",
)
#: Advice on a client configuration that git tracks: committed, it gives every clone the
#: paths of the machine and checkout it was written on.
UNTRACK_MCP_CONFIG = Advice(
    "git rm --cached {path} and commit that (kexp skill install --mcp writes each checkout "
    "its own)",
    "git rm --cached {path} and commit that (kexp skill install with its MCP option writes "
    "each checkout its own; no tool does)",
)
#: Advice on a context packet's budget of tokens.
BUDGET = Advice("give --budget {n} or more", "give budget {n} or more")
#: Advice in a context packet on what it left out (no longer in the tools' words).
LARGER_BUDGET = Advice("give a larger --budget", "give a larger budget")
#: Advice in a context packet on where to read more (no longer in the tools' words: the
#: packet keeps within its budget).
READ_MORE = Advice(
    "kexp similar --text PLAN; kexp lessons --operator OP; kexp tree ID",
    "similar (text: PLAN); lessons (operator: OP); tree (exp_id: ID)",
)
#: Advice on the fields of where an experiment was found (``--fields ref``), asked for
#: of a read of the working tree alone.
READ_ACROSS_REFS = Advice(
    "read across refs: add --all-refs (or --refs PATTERN)",
    "read across refs: give the tool all_refs: true (or refs)",
)
#: Advice under a sync that fetched other branches of the remote (other agents' work):
#: how to read them.
READ_FETCHED = Advice(
    "read them with --all-refs (kexp context --all-refs, kexp add --all-refs)",
    "read them: give consult, record and the read tools all_refs: true",
)
#: Advice under ``kexp lessons`` on the lessons its default limit left out.
MORE_LESSONS = Advice("-n {n} shows more, --all each lesson", "limit: {n} shows more")

#: Every piece of advice, as :func:`for_tools` puts them in the tools' words.
#: Advice on a context packet asked for with no env, of an operator measured on several:
#: how to ask for one env's campaign (its best, its A/A).
ASK_ONE_ENV = Advice(
    "ask for one with kexp context --env ENV",
    "ask for one: call consult with env",
)
#: Advice on a filter (operator, dtype, env: a part of the field) that matches several
#: values, none of them exactly: how to ask for one of them.
NARROW_FILTER = Advice(
    "give more of the one you mean (--operator, --dtype or --env) to read it alone",
    "give more of the one you mean (operator, dtype or env) to read it alone",
)
#: Advice under the MCP tree tool's rows when its limit left some out.
TREE_NESTED = Advice(
    "kexp tree --json gives all {n}, nested",
    "limit: {n} shows all; brief: false gives the nested trees",
)
ADVICE = (
    ASK_ONE_ENV,
    TREE_NESTED,
    NARROW_FILTER,
    INSTALL_MCP_SDK,
    WRONG_ROOT,
    OWN_MCP_CONFIG,
    UNTRACK_MCP_CONFIG,
    ALL_REFS_IDS,
    LIST_SHOWS,
    SHOW_ALL_REFS,
    LOG_REV,
    LOG_ALL_REFS,
    LOG_REMOVED,
    READ_WITHOUT_REFS,
    MERGE_SYNCED,
    SYNC_MERGES,
    MERGE_BY_HAND,
    SHARE_MEANWHILE,
    SET_ASIDE,
    SETTLE_BESIDE,
    KEEP_REMOVAL,
    TAKE_CORRECTION,
    REMOVE_THERE,
    MERGE_TO_FIX,
    EMPTY_SCORE_CI,
    ERROR_MESSAGE,
    CORRECT_SCORE,
    RESTORE_SCORE,
    RECORD_AGAIN,
    RECORD_AGAIN_ROOT,
    RECORD_FAILURE,
    REMEASURE,
    RECORD_CONTROL,
    REPLACE_ROUND,
    REMOVE_NEW,
    SET_BUGGY,
    SET_STATUS,
    MEASURED_AGAINST,
    SET_REFERENCE,
    SET_PARENT,
    CORRECT_FIELD,
    REVIEW_WHOLE,
    REVIEW_WHOLE_WORKING_TREE,
    REVIEW_WHOLE_AT,
    REVIEW_WHOLE_WORKING_TREE_AT,
    SET_RAW_RESULT,
    SET_FAILED,
    SET_MEASURED,
    BASE_COMMIT_AND_DIFF,
    COMMIT_FIRST,
    PROFILING_FILE,
    RECORD_IN_UNIT,
    RECORD_WITH_UNIT,
    PICK_KERNEL,
    NO_KERNEL,
    REMEASURE_IN_UNIT,
    ENV,
    SCORE_OR_TIMINGS,
    TIMINGS_FILES,
    CAMPAIGN_OPTIONS,
    SYNC_REMOTE,
    SYNC_BRANCH,
    SYNC_FOR_REVIEW,
    SYNC_NEW_BRANCH,
    SYNC_REWRITTEN,
    SYNC_CODE_CLASHES,
    SYNC_BRANCH_AGAIN,
    PROPOSE_AGAIN,
    SYNC_FIX_CHANGED,
    SYNC_FIX_ALL,
    ROOT,
    BUDGET,
    LARGER_BUDGET,
    READ_MORE,
    READ_ACROSS_REFS,
    READ_FETCHED,
    MORE_LESSONS,
    DIFF_FILE,
    TAKE_UNTRACKED,
    RE_ID_FORCE,  # (before RE_ID, whose path would be the flag)
    RE_ID,
)


def for_tools(text: str) -> str:
    """``text`` (a message, a warning, a packet) with each piece of advice in it in the
    MCP tools' words."""
    if "--" not in text and "kexp " not in text:
        return text
    for advice in ADVICE:
        text = advice.for_tools(text)
    return text
