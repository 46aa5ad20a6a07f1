"""GPU names as the vendors' tools print them, and the model names teams write: nvidia-smi
calls an H100 SXM5 80GB ``NVIDIA H100 80GB HBM3``, so an env copied from it (or
detected) names another machine, to a reader and to a filter, than the team's
``H100 SXM5 80GB, CUDA 12.4``. :func:`model_name` gives a tool's name in the model's
words (``kexp env`` describes the GPU so), :func:`in_model_words` an env's every GPU so
(``kexp add`` compares envs in them); :func:`names_gpu` whether an env names a GPU or
its runtime at all (a timing's device). Only names whose words differ from the model's
are listed: a vendor's name before a GPU's (``NVIDIA H100 PCIe``, ``AMD Instinct
MI300X``) and a ``-`` between words (``NVIDIA A100-SXM4-80GB``) are kexp's spelling
already (:func:`kexp.format.rules.folded_env`)."""

from __future__ import annotations

import re

__all__ = ["TOOL_NAMES", "in_model_words", "model_name", "tool_names_in"]

#: A tool's name of a GPU (its vendor's name left out) -> (the model name teams write,
#: the tool that prints it), each with where the name was read.
TOOL_NAMES: dict[str, tuple[str, str]] = {
    # nvidia-smi --query-gpu=name (NVML) on the SXM5 board; SkyPilot maps its
    # H100-80GB-SXM instances to this name (skypilot-org/skypilot#2945).
    "H100 80GB HBM3": ("H100 SXM5 80GB", "nvidia-smi"),
    # nvidia-smi --query-gpu=name on the 80GB PCIe board, as public logs of that query
    # show it (``NVIDIA A100 80GB PCIe, 81920 MiB, ...``); the 40GB one prints
    # A100-PCIE-40GB, the SXM4 ones A100-SXM4-80GB: the model's words already.
    "A100 80GB PCIe": ("A100 PCIe 80GB", "nvidia-smi"),
    # amd-smi's product_name of the MI300X module (its MARKET_NAME is AMD Instinct
    # MI300X); read in ROCm/vllm#359.
    "MI300X OAM": ("MI300X", "amd-smi"),
    # rocm-smi --showproductname's Card series is the PCI ID database's name:
    # easybuilders/easybuild-framework#3978 (MI100); lspci in ROCm/ROCm#4454 (MI300X).
    "Arcturus GL-XL [AMD Instinct MI100]": ("MI100", "rocm-smi"),
    "Aqua Vanjaram [Instinct MI300X]": ("MI300X", "rocm-smi"),
}

#: A vendor's name before a GPU's, as the tools print it.
_VENDOR = re.compile(r"^(?:nvidia|amd instinct|amd)\s+", re.IGNORECASE)
#: A count of GPUs before a name (``8x NVIDIA H100 80GB HBM3``, as ``kexp env`` writes it).
_COUNT = re.compile(r"^(\s*\d+\s*x\s+)", re.IGNORECASE)


def _key(name: str) -> str:
    """``name`` as :data:`TOOL_NAMES` is looked up: case, runs of spaces, ``-`` and
    ``_`` folded, a vendor's name left out."""
    return " ".join(re.split(r"[\s_-]+", _VENDOR.sub("", name.strip()).casefold())).strip()


_MODELS = {_key(name): entry for name, entry in TOOL_NAMES.items()}


def model_name(name: str) -> str:
    """The model name teams write of the GPU a tool names ``name`` (``NVIDIA H100 80GB
    HBM3`` is ``H100 SXM5 80GB``); ``name`` itself when :data:`TOOL_NAMES` has none."""
    found = _MODELS.get(_key(name))
    return name if found is None else found[0]


def tool_names_in(env: str) -> list[tuple[str, str, str]]:
    """The GPUs ``env`` names as a tool prints them, each (the name as written, the
    model's, the tool): a part of it between ``,`` (a count such as ``8x`` before it)."""
    found = []
    for part in env.split(","):
        name = _COUNT.sub("", part).strip()
        entry = _MODELS.get(_key(name))
        if entry is not None:
            found.append((name, *entry))
    return found


def in_model_words(env: str) -> str:
    """``env`` with each GPU a tool names in it (:func:`tool_names_in`) named by its
    model: ``NVIDIA H100 80GB HBM3, CUDA 12.4`` is ``H100 SXM5 80GB, CUDA 12.4``."""
    parts = env.split(",")
    for at, part in enumerate(parts):
        count = _COUNT.match(part)
        name = part[count.end() :] if count else part
        entry = _MODELS.get(_key(name))
        if entry is not None:
            space = name[: len(name) - len(name.lstrip())]
            parts[at] = f"{count.group(1) if count else ''}{space}{entry[0]}"
    return ",".join(parts)


#: Words of an ``env`` that name a GPU or its runtime, whole words of any case: CUDA, ROCm,
#: HIP and their libraries (a version glued on: ``rocm6.1``, a wheel's ``+cu121``), the
#: vendors' and families' names, and the GPU models (``H100``, ``A10G``, ``L40S``,
#: ``MI300X``, ``gfx90a``). A CPU's names (``EPYC 9654``, ``Xeon``, ``Cortex-A72``) are none.
GPU_WORDS = re.compile(
    r"(?<![a-z0-9])(?:"
    r"(?:cuda|rocm|hip|cudnn|nccl|rccl|cu1\d\d|gpus?|nvidia|geforce|quadro|tesla|radeon"
    r"|instinct|rtx|gtx)(?![a-z])"
    r"|(?:a(?:2|10|16|30|40|100|800)|h(?:20|100|200|800)|b[123]00|g[bh][123]00|l(?:4|20|40)"
    r"|v100|t4|p(?:4|40|100)|k80|mi\d{2,3}|gfx\d{2,4})[a-z]?(?![a-z0-9])"
    r")",
    re.IGNORECASE,
)


def names_gpu(env: object) -> bool:
    """Whether ``env`` names a GPU or a GPU runtime (:data:`GPU_WORDS`)."""
    return isinstance(env, str) and GPU_WORDS.search(env) is not None
