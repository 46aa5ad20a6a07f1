"""The environment an experiment runs in, on any machine: the GPU model and count and
its driver when there is one, the kernel toolchain present (CUDA or ROCm, torch,
triton), the CPU model and cores, the C compiler (``cc --version``), the OS and Python.

The Python twin of ``kexp env`` is :func:`detect_env` (``.describe()`` gives the string
kexp prefills ``env`` with, each GPU named by its model as teams write it;
:func:`detected_env` the same, refusing an empty one).
Every probe is optional: a missing tool, a failing or slow command, or output kexp
cannot read leaves that part out, and never raises. :func:`gpu_present` tells, without
running anything, whether this machine has a GPU kernels can run on.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kexp.core.advice import ENV
from kexp.core.errors import KexpError
from kexp.core.gpunames import model_name

#: Seconds each probe command may take.
PROBE_TIMEOUT_S = 10.0
#: Python distributions whose versions are part of the environment, as (label, names).
PACKAGES = (("torch", ("torch",)), ("triton", ("triton", "pytorch-triton-rocm")))

_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
_NVCC_RELEASE = re.compile(r"release\s+([0-9][0-9.]*)")
_ROCM_VERSION = re.compile(r"ROCm version\s*:\s*([0-9][0-9.]*)", re.IGNORECASE)
_VERSION = re.compile(r"([0-9]+(?:\.[0-9]+)+)")
#: Device files of the GPUs kernels run on: NVIDIA, AMD (ROCm), WSL's GPU.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
#: Whether this is a Mac, whose GPU (Metal, MPS) has no device file to look for.
APPLE_GPU = sys.platform == "darwin"


@dataclasses.dataclass
class EnvInfo:
    """What was detected; empty strings and lists mean "unknown"."""

    gpus: list[str] = dataclasses.field(default_factory=list)
    driver: str = ""
    cuda: str = ""
    rocm: str = ""
    packages: dict[str, str] = dataclasses.field(default_factory=dict)
    cpu: str = ""
    #: Physical cores (logical CPUs where the cores cannot be told); 0: unknown.
    cores: int = 0
    compiler: str = ""
    os: str = ""
    python: str = ""

    def describe(self) -> str:
        """One line such as ``8x NVIDIA H200, driver 570.86.15, CUDA 12.8, torch 2.6.0,
        AMD EPYC 9654 (96 cores), gcc 12.2.0, Ubuntu 22.04.4 LTS, Python 3.11.9``: the
        GPU and its toolchain first, then the host. A GPU whose tool's name is not its
        model's is named by its model (:func:`kexp.core.gpunames.model_name`:
        ``NVIDIA H100 80GB HBM3`` is ``H100 SXM5 80GB``); ``gpus`` keeps the tool's."""
        parts: list[str] = []
        # the model as teams write it (nvidia-smi's NVIDIA H100 80GB HBM3 is H100 SXM5 80GB)
        counts = Counter(model_name(gpu) for gpu in self.gpus)
        parts.extend(f"{n}x {name}" if n > 1 else name for name, n in counts.items())
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.cuda:
            parts.append(f"CUDA {self.cuda}")
        if self.rocm:
            parts.append(f"ROCm {self.rocm}")
        parts.extend(f"{label} {version}" for label, version in self.packages.items())
        if self.cpu or self.cores:
            cores = f"{self.cores} core{'s' if self.cores != 1 else ''}" if self.cores else ""
            parts.append(f"{self.cpu} ({cores})" if self.cpu and cores else self.cpu or cores)
        parts.extend(part for part in (self.compiler, self.os) if part)
        if self.python:
            parts.append(f"Python {self.python}")
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
            "cpu": self.cpu,
            "cores": self.cores,
            "compiler": self.compiler,
            "os": self.os,
            "python": self.python,
        }


#: Where a toolkit's tools are when its folder is not on ``PATH`` (an MCP client or a
#: CI job starts kexp with a shorter ``PATH`` than a shell's): each environment
#: variable naming the toolkit's folder, then its usual place.
TOOLKIT_FOLDERS = {
    "nvcc": (("CUDA_HOME", "CUDA_PATH"), "/usr/local/cuda"),
    "amd-smi": (("ROCM_PATH",), "/opt/rocm"),
    "rocm-smi": (("ROCM_PATH",), "/opt/rocm"),
}


def find_tool(name: str) -> str | None:
    """The command to run for the tool ``name``: on ``PATH``, else in its toolkit's
    folder (:data:`TOOLKIT_FOLDERS`), so that the env kexp detects does not depend on
    the ``PATH`` it was started with; None when there is none."""
    found = shutil.which(name)
    if found is not None or name not in TOOLKIT_FOLDERS:
        return found
    variables, usual = TOOLKIT_FOLDERS[name]
    folders = [os.environ.get(v, "") for v in variables] + [usual]
    for folder in filter(None, folders):
        found = shutil.which(name, path=str(Path(folder) / "bin"))
        if found is not None:
            return found
    return None


def _run(*command: str) -> str:
    """stdout of ``command``, or "" when it is missing, fails or takes too long."""
    tool = find_tool(command[0])
    if tool is None:
        return ""
    try:
        result = subprocess.run(
            [tool, *command[1:]],
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
    """The NVIDIA GPUs and driver, and the CUDA toolkit (nvcc), with or without a GPU."""
    gpus, driver = parse_nvidia_smi_query(
        _run("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")
    )
    info.cuda = parse_cuda_version(_run("nvcc", "--version"))
    if not gpus:
        return
    info.gpus, info.driver = gpus, driver
    info.cuda = info.cuda or parse_cuda_version(_run("nvidia-smi"))


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


def parse_cpuinfo(text: str) -> tuple[str, int]:
    """The CPU model and physical core count from Linux's ``/proc/cpuinfo`` (0 cores
    when it does not tell them apart)."""
    model = ""
    cores: set[tuple[str, str]] = set()
    physical = core = ""
    for line in [*text.splitlines(), ""]:
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep:  # a blank line ends one processor's block
            if core:
                cores.add((physical, core))
            physical = core = ""
        elif key == "model name" and not model:
            model = _clean_name(value)
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
    return model, len(cores)


def parse_lscpu(text: str) -> str:
    """The CPU model from ``lscpu`` (ARM machines, whose ``/proc/cpuinfo`` names none)."""
    match = re.search(r"^\s*Model name:\s*(.+)$", text, re.MULTILINE)
    return _clean_name(match.group(1)) if match else ""


def parse_compiler(text: str) -> str:
    """``gcc 12.2.0``, ``clang 18.1.3`` or ``Apple clang 15.0.0`` from the first line of
    ``cc --version``."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    versions = _VERSION.findall(first.split("(")[0] if "clang" in first else first)
    if not versions:
        versions = _VERSION.findall(first)
    if not versions:
        return ""
    if "clang" in first.lower():
        name = "Apple clang" if first.startswith("Apple") else "clang"
        return f"{name} {versions[0]}"
    if "gcc" in first.lower() or "cc (" in first or "Free Software Foundation" in text:
        return f"gcc {versions[-1]}"
    return _clean_name(first)


def parse_os_release(text: str) -> str:
    """The ``PRETTY_NAME`` of ``/etc/os-release``."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "PRETTY_NAME":
            return _clean_name(value.strip().strip("'\""))
    return ""


def _host(info: EnvInfo) -> None:
    """The CPU and its cores, the OS and Python."""
    info.python = platform.python_version()
    if sys.platform == "darwin":
        info.cpu = _clean_name(_run("sysctl", "-n", "machdep.cpu.brand_string"))
        cores = _run("sysctl", "-n", "hw.physicalcpu").strip()
        info.cores = int(cores) if cores.isdigit() else 0
        version = _run("sw_vers", "-productVersion").strip()
        info.os = f"macOS {version}" if version else ""
    elif sys.platform.startswith("linux"):
        info.cpu, info.cores = parse_cpuinfo(_read(Path("/proc/cpuinfo")))
        info.cpu = info.cpu or parse_lscpu(_run("lscpu"))
        info.os = parse_os_release(_read(Path("/etc/os-release")))
    info.cpu = info.cpu or _clean_name(platform.processor() or platform.machine())
    info.cores = info.cores or os.cpu_count() or 0
    info.os = info.os or _clean_name(f"{platform.system()} {platform.release()}")


def _compiler(info: EnvInfo) -> None:
    info.compiler = parse_compiler(_run("cc", "--version"))


def detect_env() -> EnvInfo:
    """Probe ``nvidia-smi`` and ``nvcc``, ``amd-smi``/``rocm-smi``, the Python packages,
    the CPU, ``cc``, the OS and Python; never raises."""
    info = EnvInfo()
    for probe in (_nvidia, _amd, _host, _compiler):
        try:
            probe(info)
        except Exception:  # a probe must never break recording an experiment
            continue
    try:
        info.packages = package_versions()
    except Exception:
        info.packages = {}
    return info


def detected_env() -> str:
    """The detected environment as one line (what ``--detect-env`` records); an error,
    never an empty ``env``, when nothing at all could be detected."""
    text = detect_env().describe()
    if not text:
        raise KexpError(
            "the environment could not be detected (no GPU tools, CPU, OS or Python "
            f"version found): give it yourself, e.g. {ENV}"
        )
    return text


def gpu_present() -> bool:
    """Whether this machine may run GPU kernels: a device file of NVIDIA, AMD (ROCm) or
    WSL GPUs exists, or it is a Mac (whose GPU has no device file). Runs nothing."""
    return APPLE_GPU or any(os.path.exists(path) for path in GPU_DEVICE_FILES)
