"""The environment an experiment runs in: GPU model and count, driver, CUDA or ROCm
version, torch and triton versions.

The Python twin of ``kexp env`` is :func:`detect_env` (``.describe()`` gives the string
kexp prefills ``env`` with). Every probe is optional: a missing tool, a failing or slow
command, or output kexp cannot read leaves that part out, and never raises.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

#: Seconds each probe command may take.
PROBE_TIMEOUT_S = 10.0
#: Python distributions whose versions are part of the environment, as (label, names).
PACKAGES = (("torch", ("torch",)), ("triton", ("triton", "pytorch-triton-rocm")))

_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
_NVCC_RELEASE = re.compile(r"release\s+([0-9][0-9.]*)")
_ROCM_VERSION = re.compile(r"ROCm version\s*:\s*([0-9][0-9.]*)", re.IGNORECASE)
_VERSION = re.compile(r"([0-9]+(?:\.[0-9]+)+)")


@dataclasses.dataclass
class EnvInfo:
    """What was detected; empty strings and lists mean "unknown"."""

    gpus: list[str] = dataclasses.field(default_factory=list)
    driver: str = ""
    cuda: str = ""
    rocm: str = ""
    packages: dict[str, str] = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        """One line such as ``8x NVIDIA H200, driver 570.86.15, CUDA 12.8, torch 2.6.0``."""
        parts: list[str] = []
        counts = Counter(self.gpus)
        parts.extend(f"{n}x {name}" if n > 1 else name for name, n in counts.items())
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.cuda:
            parts.append(f"CUDA {self.cuda}")
        if self.rocm:
            parts.append(f"ROCm {self.rocm}")
        parts.extend(f"{label} {version}" for label, version in self.packages.items())
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys), with the one-line ``env`` string."""
        return {
            "env": self.describe(),
            "gpus": list(self.gpus),
            "driver": self.driver,
            "cuda": self.cuda,
            "rocm": self.rocm,
            "packages": dict(self.packages),
        }


def _run(*command: str) -> str:
    """stdout of ``command``, or "" when it is missing, fails or takes too long."""
    if shutil.which(command[0]) is None:
        return ""
    try:
        result = subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""
    return result.stdout if result.returncode == 0 else ""


def _clean_name(name: str) -> str:
    return " ".join(name.split())


def parse_nvidia_smi_query(text: str) -> tuple[list[str], str]:
    """GPU names and the driver version from
    ``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``.
    """
    gpus: list[str] = []
    drivers: list[str] = []
    for line in text.splitlines():
        name, _, driver = line.rpartition(",")
        name, driver = _clean_name(name), driver.strip()
        if not name or not _VERSION.fullmatch(driver):
            continue
        gpus.append(name)
        drivers.append(driver)
    return gpus, (drivers[0] if drivers else "")


def parse_cuda_version(text: str) -> str:
    """The CUDA version from ``nvcc --version`` or the header of ``nvidia-smi``."""
    match = _NVCC_RELEASE.search(text) or _CUDA_VERSION.search(text)
    return match.group(1).rstrip(".") if match else ""


def parse_amd_smi_static(text: str) -> list[str]:
    """GPU names (``MARKET_NAME``) from ``amd-smi static --asic``."""
    names = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().upper() == "MARKET_NAME" and value.strip():
            names.append(_clean_name(value))
    return names


def parse_rocm_smi_products(text: str) -> list[str]:
    """GPU names (``Card Series``) from ``rocm-smi --showproductname``."""
    names = []
    for line in text.splitlines():
        match = re.search(r"Card Series\s*:\s*(.+)$", line, re.IGNORECASE)
        if match and match.group(1).strip():
            names.append(_clean_name(match.group(1)))
    return names


def parse_rocm_smi_driver(text: str) -> str:
    """The driver version from ``rocm-smi --showdriverversion``."""
    match = re.search(r"Driver version\s*:\s*(\S+)", text, re.IGNORECASE)
    return match.group(1) if match else ""


def parse_rocm_version(text: str) -> str:
    """The ROCm version from ``amd-smi version`` or a ROCm ``.info/version`` file."""
    match = _ROCM_VERSION.search(text)
    if match:
        return match.group(1).rstrip(".")
    first = text.strip().splitlines()[0] if text.strip() else ""
    version = _VERSION.match(first.strip())
    return version.group(1) if version else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _nvidia(info: EnvInfo) -> None:
    gpus, driver = parse_nvidia_smi_query(
        _run("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")
    )
    if not gpus:
        return
    info.gpus, info.driver = gpus, driver
    info.cuda = parse_cuda_version(_run("nvcc", "--version")) or parse_cuda_version(
        _run("nvidia-smi")
    )


def _amd(info: EnvInfo) -> None:
    gpus = parse_amd_smi_static(_run("amd-smi", "static", "--asic"))
    if not gpus:
        gpus = parse_rocm_smi_products(_run("rocm-smi", "--showproductname"))
    rocm = parse_rocm_version(_run("amd-smi", "version"))
    if not rocm:
        rocm_path = Path(os.environ.get("ROCM_PATH") or "/opt/rocm")
        rocm = parse_rocm_version(_read(rocm_path / ".info" / "version"))
    if not gpus and not rocm:
        return
    info.gpus = info.gpus or gpus
    info.rocm = rocm
    if gpus and not info.driver:
        info.driver = parse_rocm_smi_driver(_run("rocm-smi", "--showdriverversion"))


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES` (without importing them)."""
    found: dict[str, str] = {}
    for label, names in PACKAGES:
        for name in names:
            try:
                found[label] = importlib.metadata.version(name)
                break
            except (importlib.metadata.PackageNotFoundError, ValueError):
                continue
    return found


def detect_env() -> EnvInfo:
    """Probe ``nvidia-smi``, ``amd-smi``/``rocm-smi`` and Python packages; never raises."""
    info = EnvInfo()
    for probe in (_nvidia, _amd):
        try:
            probe(info)
        except Exception:  # a probe must never break recording an experiment
            continue
    try:
        info.packages = package_versions()
    except Exception:
        info.packages = {}
    return info
