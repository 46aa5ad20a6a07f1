"""One campaign, one key, whatever its spelling: kexp's spelling of an ``operator_sig``,
``dtype_sig`` or ``env`` (:func:`spelled`: ``torch.bfloat16`` is ``bf16``,
``path.py: function`` is ``path.py:function``, ``MI300X ROCm-6.2`` is ``MI300X ROCm
6.2``), the key every grouping of a campaign (operator × dtype × env) takes
(:func:`campaign_key`: stats, tree, lessons, the controls of an env, a record's
campaign), and the name it is shown by (:func:`campaign_names`: one per value, chosen
once over all a read shows, :func:`usual_spelling`). An operator keeps its case
(``k.py:Gemm`` and ``k.py:gemm`` are two kernels); a dtype and an env do not. The
filters read a value by the same table in any case, as a query
(:func:`kexp.storage.operators.part_of`), and say when they read two campaigns."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from kexp.core.gpunames import in_model_words

__all__ = [
    "CAMPAIGN_COLUMNS",
    "DTYPE_NAMES",
    "DTYPE_PATTERN",
    "DTYPE_SPELLINGS",
    "campaign_key",
    "campaign_names",
    "canonical",
    "folded",
    "spelled",
    "usual_spelling",
]

#: The columns a campaign is: operator × dtype × env.
CAMPAIGN_COLUMNS = ("operator_sig", "dtype_sig", "env")

#: The usual spellings of a dtype (PyTorch's, NumPy's, Triton's, with or without their
#: ``torch.``/``np.``/``tl.`` prefix), each read as the short name kexp records. ``fp8``
#: is e4m3 (the fp8 of inference and forward passes); e5m2 is a dtype of its own,
#: ``fp8e5m2``, never read by ``fp8``.
DTYPE_SPELLINGS: dict[str, tuple[str, ...]] = {
    "bf16": ("bfloat16",),
    "fp16": ("float16", "half"),
    "fp32": ("float32", "float"),
    "fp64": ("float64", "double"),
    "fp8": (
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3",
        "float8e4nv",
        "fp8e4m3",
        "fp8_e4m3",
        "fp8-e4m3",
        "e4m3",
    ),
    "fp8e5m2": ("float8_e5m2", "float8_e5m2fnuz", "float8e5", "fp8_e5m2", "fp8-e5m2", "e5m2"),
}
#: Each usual name of a dtype -> its short name.
DTYPE_NAMES = {name: short for short, names in DTYPE_SPELLINGS.items() for name in names}
#: A usual name of a dtype in a (lowercased) value, whole, with its module or not.
DTYPE_PATTERN = re.compile(
    r"(?<![\w.])(?<![a-z0-9][-_])(?:(?:torch|tl|np|numpy)\.)?("
    + "|".join(sorted(map(re.escape, DTYPE_NAMES), key=len, reverse=True))
    + r")(?!\w)(?!-[a-z0-9])"
)
#: In an env, a ``-`` or ``_`` between two letters or digits: a space (``H100-SXM5``);
#: one that ends a word or stands beside a symbol is kept (``xnack-`` is not ``xnack+``).
_JOINING = re.compile(r"(?<=[a-z0-9])[-_](?=[a-z0-9])")
#: A vendor's name before a GPU's (nvidia-smi's ``NVIDIA H100 ...``, rocm-smi's ``AMD
#: Instinct MI300X``), at the start of a part of an env.
_VENDOR = re.compile(r"(^|[,:/(])(?:nvidia|amd instinct|amd)\s+")
_SPACES = re.compile(r"\s+")
_AROUND = re.compile(r" ?(,|:|/|->) ?")


@functools.lru_cache(maxsize=65536)  # every row's values: they repeat
def spelled(column: str, value: str) -> str:
    """``value`` of ``column`` in kexp's spelling: runs of whitespace one space and none
    around ``,`` ``:`` ``/`` ``->`` (``kernels/a.py: f`` is ``kernels/a.py:f``); an
    operator in its own case (file and function names are case-sensitive: ``k.py:Gemm``
    is not ``k.py:gemm``), a dtype and an env lowercased (:func:`folded`); a dtype's
    usual names its short one (:data:`DTYPE_SPELLINGS`: ``torch.bfloat16`` is
    ``bf16``); in an env, a ``-`` or ``_`` between two letters or
    digits a space (never one that ends a word: ``xnack-`` stays) and a vendor's name
    before a GPU's left out (``NVIDIA H100-SXM5`` is ``H100 SXM5``), and a GPU as a tool
    prints it named by its model (:func:`kexp.core.gpunames.in_model_words`: nvidia-smi's
    ``NVIDIA H100 80GB HBM3`` is ``H100 SXM5 80GB``)."""
    if column == "env":
        text = _JOINING.sub(" ", in_model_words(value).lower())
    elif column == "dtype_sig":
        text = DTYPE_PATTERN.sub(lambda found: DTYPE_NAMES[found.group(1)], value.lower())
    else:
        text = folded(column, value)
    text = _AROUND.sub(r"\1", _SPACES.sub(" ", text).strip())
    return _VENDOR.sub(r"\1", text) if column == "env" else text


def folded(column: str, value: str) -> str:
    """``value`` of ``column`` in the case kexp tells values apart by: an operator's as
    written (``K.py`` and ``k.py`` are two files), a dtype's or env's lowercased."""
    return value if column == "operator_sig" else value.lower()


def canonical(column: str, value: object) -> str:
    """:func:`spelled` of a recorded value (None or a non-string: its text, "" for None)."""
    return spelled(column, value if isinstance(value, str) else str(value or ""))


#: Each campaign's values as recorded -> its key (:func:`campaign_key`): a store's
#: rows repeat a few of them, each made once (emptied past :data:`_KEPT_KEYS`).
_KEYS: dict[tuple[Any, Any, Any], tuple[str, str, str]] = {}
_KEPT_KEYS = 1 << 16


def campaign_key(record: Any) -> tuple[str, str, str]:
    """The campaign of ``record`` (anything with ``operator_sig``, ``dtype_sig`` and
    ``env``, or a dict of them): the three in kexp's spelling (:func:`spelled`), so
    that ``bf16`` and ``torch.bfloat16`` of one kernel on one machine are one campaign."""
    if isinstance(record, dict):
        values = (record.get("operator_sig"), record.get("dtype_sig"), record.get("env"))
    else:
        values = (record.operator_sig, record.dtype_sig, record.env)
    key = _KEYS.get(values)
    if key is None:
        if len(_KEYS) >= _KEPT_KEYS:
            _KEYS.clear()
        operator, dtype, env = values
        key = _KEYS[values] = (
            canonical("operator_sig", operator),
            canonical("dtype_sig", dtype),
            canonical("env", env),
        )
    return key


def usual_spelling(column: str, spellings: Iterable[str]) -> str:
    """The name a campaign's ``column`` is shown by, of the ``spellings`` its records
    hold (one per record, stripped): the one most written, as ``kexp validate`` and
    ``kexp context`` advise writing; among as many, kexp's own (``bf16``), then the first
    in text order. Empty when none is given."""
    counts: dict[str, int] = {}
    for spelling in spellings:
        counts[spelling] = counts.get(spelling, 0) + 1
    if not counts:
        return ""
    return min(
        counts,
        key=lambda s: (-counts[s], folded(column, s) != canonical(column, s), s),
    )


def campaign_names(records: Iterable[Any]) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """Each campaign of ``records`` (:func:`campaign_key`) -> the name it is shown by:
    each column's spelling most written (:func:`usual_spelling`) among all ``records``
    of that column's key, not of the campaign alone: an operator spelt ``k.py:f`` twice
    on one env and ``k.py: f`` once on another is ``k.py:f`` on both, one name in every
    place a read shows it (its page, its cells, its rows)."""
    keys: set[tuple[str, str, str]] = set()
    spellings: tuple[dict[str, list[str]], ...] = ({}, {}, {})
    for record in records:
        key = campaign_key(record)
        keys.add(key)
        for at, column in enumerate(CAMPAIGN_COLUMNS):
            value = str(getattr(record, column, "") or "").strip()
            spellings[at].setdefault(key[at], []).append(value)
    shown = [
        {part: usual_spelling(column, found) for part, found in spellings[at].items()}
        for at, column in enumerate(CAMPAIGN_COLUMNS)
    ]
    return {key: (shown[0][key[0]], shown[1][key[1]], shown[2][key[2]]) for key in keys}
