"""The host side of `verify`: the NVIDIA driver and each GPU, as the CUDA runtime would see them.

The order of the probes and why (cheapest and most certain first; the driver libraries in a
bounded child process): docs/verify.md. What stays unknown ends in `GpuReport.problems`, with
why, never as an exception."""

from __future__ import annotations

import ctypes
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ninfer_kits.config import settings
from ninfer_kits.host import nvidia_smi as smi
from ninfer_kits.host.children import ProbeTimeout, probe
from ninfer_kits.host.versions import DRIVER_VERSION

PROC_VERSION: Final = Path("/proc/driver/nvidia/version")
LIBCUDA: Final = "libcuda.so.1"
LIBNVML: Final = "libnvidia-ml.so.1"
SMI_FIELDS: Final = ("driver_version", "compute_cap", "name")
DEFAULT_TIMEOUT: Final = 20.0  # seconds per probe: cuInit on a host of 8 GPUs can take several


# cuDeviceGetAttribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h)
CU_ATTRIBUTE_MAJOR: Final = 75
CU_ATTRIBUTE_MINOR: Final = 76
CUDA_ERROR_NO_DEVICE: Final = 100
NVML_DRIVER_BUFFER: Final = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
NVML_NAME_BUFFER: Final = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE
NAME_BUFFER: Final = 256

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  …" (and the
# proprietary module's "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  …")
NVRM_LINE: Final = re.compile(
    r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(?P<version>\d+\.\d+(?:\.\d+)?)(?:\s|$)",
    re.MULTILINE)
CAPABILITY: Final = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)$")


@dataclass(frozen=True)
class Gpu:
    """One GPU as the probe saw it; `major`/`minor` are None when the source did not say."""

    index: int
    name: str
    major: int | None
    minor: int | None

    @property
    def capability(self) -> tuple[int, int] | None:
        return None if self.major is None or self.minor is None else (self.major, self.minor)

    @property
    def shown(self) -> str:
        cap = self.capability
        where = f"compute capability {cap[0]}.{cap[1]}" if cap else "compute capability unknown"
        return f"GPU {self.index} {self.name} ({where})"


@dataclass(frozen=True)
class GpuReport:
    """What the host has; `problems`: what stayed unknown and why, one line each."""

    driver_version: str | None  # 580.159.04
    driver_source: str  # "/proc/driver/nvidia/version", "libnvidia-ml.so.1", "nvidia-smi", ""
    driver_cuda: tuple[int, int] | None  # what its libcuda offers: (13, 0)
    gpus: tuple[Gpu, ...]
    gpu_source: str  # "libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi", ""
    # cuInit failed but not for "no device": the kit's CUDA runtime fails the same way
    cuda_error: str | None
    problems: tuple[str, ...]
    no_driver: bool = False  # nothing of a driver at all: no module, no libcuda, no nvidia-smi


def parse_proc_version(text: str) -> str | None:
    match = NVRM_LINE.search(text)
    return match["version"] if match else None


def parse_cuda_version(value: int) -> tuple[int, int] | None:
    """cuDriverGetVersion's and NVML's form: 1000 × major + 10 × minor (13000 → 13.0)."""
    if value <= 0:
        return None
    return value // 1000, (value % 1000) // 10


def parse_nvidia_smi(text: str) -> tuple[str | None, tuple[Gpu, ...], tuple[str, ...]]:
    """"580.159.04, 9.0, NVIDIA H200" a GPU (the name last: only it may hold a comma): the
    driver version, the GPUs and the lines not read."""
    driver: str | None = None
    gpus: list[Gpu] = []
    unread: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = smi.fields(line, len(SMI_FIELDS))
        if len(fields) != 3 or DRIVER_VERSION.match(fields[0]) is None:
            unread.append(smi.shown(line.strip()))
            continue
        driver = driver or fields[0]
        cap = CAPABILITY.match(fields[1])
        gpus.append(Gpu(index=len(gpus), name=smi.shown(fields[2]) or "unnamed GPU",
                        major=int(cap["major"]) if cap else None,
                        minor=int(cap["minor"]) if cap else None))
    return driver, tuple(gpus), tuple(unread)


def probe_host(*, proc_version: Path = PROC_VERSION, libcuda: str | None = LIBCUDA,
               libnvml: str | None = LIBNVML, nvidia_smi: str | None = smi.PROGRAM,
               timeout: float = DEFAULT_TIMEOUT) -> GpuReport:
    """This host's driver and GPUs; a library or program given as None is not tried."""
    driver: str | None = None
    driver_source = ""
    driver_cuda: tuple[int, int] | None = None
    gpus: tuple[Gpu, ...] = ()
    gpu_source = ""
    cuda_error: str | None = None
    gpus_settled = False  # libcuda answered (even "no device"): what the kit would see
    driver_why: list[str] = []
    gpu_why: list[str] = []
    absent = 0  # probes that found nothing of a driver at all

    text, why = _read_small(proc_version)
    if text is not None:
        driver = parse_proc_version(text)
        if driver is not None:
            driver_source = str(proc_version)
        else:
            driver_why.append(f"{proc_version} has no driver version in it")
    else:
        absent += why.startswith("is absent")
        driver_why.append(f"{proc_version} {why}")

    if libcuda is not None:
        answer = _probe_in_child("cuda", libcuda, timeout)
        if answer.failure is not None:
            absent += answer.absent
            driver_why.append(answer.failure)
            gpu_why.append(answer.failure)
        else:
            facts = answer.facts
            driver_cuda = parse_cuda_version(_int(facts.get("cuda")))
            if driver_cuda is None:
                driver_why.append(f"{libcuda}: {facts.get('cuda_error') or 'no CUDA version'}")
            init = facts.get("init")
            if init is None:
                gpus, gpu_source, gpus_settled = _gpus(facts.get("gpus")), libcuda, True
                if not gpus:
                    gpu_why.append(f"{libcuda} sees no GPU")
            elif _int(facts.get("init_code")) == CUDA_ERROR_NO_DEVICE:
                gpu_source, gpus_settled = libcuda, True
                gpu_why.append(f"{libcuda} sees no GPU (cuInit: {init}){_visible_note()}")
            else:
                cuda_error = f"cuInit failed: {init}"
                gpu_why.append(f"{libcuda}: {cuda_error}")

    if libnvml is not None and (driver is None or not gpus_settled):
        answer = _probe_in_child("nvml", libnvml, timeout)
        if answer.failure is not None:
            absent += answer.absent
            driver_why.append(answer.failure)
            gpu_why.append(answer.failure)
        else:
            facts = answer.facts
            if driver is None and isinstance(facts.get("driver"), str) \
                    and DRIVER_VERSION.match(facts["driver"]):
                driver, driver_source = facts["driver"], libnvml
            driver_cuda = driver_cuda or parse_cuda_version(_int(facts.get("cuda")))
            if not gpus_settled:
                if facts.get("error"):
                    gpu_why.append(f"{libnvml}: {facts['error']}")
                else:
                    gpus, gpu_source = _gpus(facts.get("gpus")), libnvml
                    gpus_settled = True

    if nvidia_smi is not None and (driver is None or not gpus_settled):
        said = smi.query(SMI_FIELDS, program=nvidia_smi, timeout=timeout)
        smi_driver, smi_gpus, failure = _from_smi(said, nvidia_smi)
        absent += said.absent
        if failure is not None:
            driver_why.append(failure)
            gpu_why.append(failure)
        if driver is None and smi_driver is not None:
            driver, driver_source = smi_driver, "nvidia-smi"
        if not gpus_settled and failure is None:
            gpus, gpu_source, gpus_settled = smi_gpus, "nvidia-smi", True

    problems = []
    if driver is None and driver_cuda is None:
        problems.append("driver version unknown, because " + _and(driver_why))
    if not gpus:
        problems.append("GPUs unknown, because " + _and(gpu_why) if not gpus_settled
                        else "no GPU found, because " + _and(gpu_why))
    tried = 1 + sum(item is not None for item in (libcuda, libnvml, nvidia_smi))
    return GpuReport(driver_version=driver, driver_source=driver_source, driver_cuda=driver_cuda,
                     gpus=gpus, gpu_source=gpu_source, cuda_error=cuda_error,
                     problems=tuple(problems),
                     no_driver=driver is None and driver_cuda is None and absent == tried)


def _read_small(path: Path) -> tuple[str | None, str]:
    try:
        with open(path, "rb") as stream:
            return stream.read(65536).decode("utf-8", "replace"), ""
    except FileNotFoundError:
        return None, "is absent (no NVIDIA kernel module is loaded)"
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"


def _visible_note() -> str:
    visible = settings.read(settings.CUDA_VISIBLE_DEVICES)
    return "" if visible is None else f", with CUDA_VISIBLE_DEVICES={smi.shown(visible)!r}"


def _and(reasons: Sequence[str]) -> str:
    reasons = list(dict.fromkeys(reasons)) or ["nothing was probed"]
    return reasons[0] if len(reasons) == 1 else "; ".join(reasons[:-1]) + "; and " + reasons[-1]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _gpus(raw: object) -> tuple[Gpu, ...]:
    """The child's list, checked (another process's output)."""
    if not isinstance(raw, list):
        return ()
    gpus: list[Gpu] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        major, minor, name = item.get("major"), item.get("minor"), item.get("name")
        known = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1000
                    for v in (major, minor))
        gpus.append(Gpu(index=len(gpus),
                        name=smi.shown(name) if isinstance(name, str) and name else "unnamed GPU",
                        major=major if known else None, minor=minor if known else None))
    return tuple(gpus)


def _from_smi(answer: smi.Answer, program: str) -> tuple[str | None, tuple[Gpu, ...], str | None]:
    """(driver, GPUs, why nvidia-smi's answer could not be used, or None)."""
    if answer.failure is not None:
        return None, (), answer.failure
    driver, gpus, unread = parse_nvidia_smi(answer.text)
    if unread and not gpus:
        return None, (), f"{program} printed what this tool cannot read ({unread[0]})"
    return driver, gpus, None


# --------------------------------------------------------------------------- bounded children


@dataclass(frozen=True)
class _Answer:
    facts: Mapping[str, Any]
    failure: str | None = None
    absent: bool = False  # the library is not there at all


_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from ninfer_kits.verify.gpu_host import _child_main; "
          "_child_main(sys.argv[2], sys.argv[3])")


def _probe_in_child(kind: Literal["cuda", "nvml"], library: str, timeout: float) -> _Answer:
    package_parent = str(Path(__file__).resolve().parents[2])
    command = [sys.executable, "-I", "-c", _CHILD, package_parent, kind, library]
    try:
        done = probe(command, timeout=timeout)
    except ProbeTimeout:
        return _Answer({}, f"{library} did not answer within {timeout:g} s (killed)")
    code, out, err = done.returncode, done.stdout[:1 << 20], done.stderr[-4096:]
    try:
        facts = json.loads(out) if code == 0 else None
    except ValueError:
        facts = None
    if not isinstance(facts, dict):
        how = (f"was killed by signal {-code}" if code < 0 else f"exited with status {code}")
        last = smi.shown(err.strip().splitlines()[-1]) if err.strip() else "no message"
        return _Answer({}, f"probing {library} failed: the probe {how} ({last})")
    load = facts.get("load_error")
    if isinstance(load, str):
        return _Answer({}, f"{library} could not be loaded ({smi.shown(load)})",
                       absent="cannot open shared object file" in load)
    return _Answer(facts)


def _child_main(kind: str, library: str) -> None:
    facts = _libcuda_facts(library) if kind == "cuda" else _nvml_facts(library)
    sys.stdout.write(json.dumps(facts))


def _load(library: str) -> ctypes.CDLL | str:
    try:
        return ctypes.CDLL(library)
    except OSError as error:
        return str(error)


def _function(lib: ctypes.CDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


def _libcuda_facts(library: str) -> dict[str, Any]:
    lib = _load(library)
    if isinstance(lib, str):
        return {"load_error": lib}
    c_int, c_uint, p_int = ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)
    facts: dict[str, Any] = {}
    try:
        get_version = _function(lib, "cuDriverGetVersion", c_int, p_int)
        init = _function(lib, "cuInit", c_int, c_uint)
        get_count = _function(lib, "cuDeviceGetCount", c_int, p_int)
        get_device = _function(lib, "cuDeviceGet", c_int, p_int, c_int)
        get_attribute = _function(lib, "cuDeviceGetAttribute", c_int, p_int, c_int, c_int)
        get_name = _function(lib, "cuDeviceGetName", c_int, ctypes.c_char_p, c_int, c_int)
    except AttributeError as error:
        return {"load_error": f"not a CUDA driver library: {error}"}

    def said(code: int) -> str:
        return f"{_cuda_error_name(lib, code)} ({code})"

    version = c_int(0)
    code = get_version(ctypes.byref(version))
    if code == 0:
        facts["cuda"] = version.value
    else:
        facts["cuda_error"] = f"cuDriverGetVersion failed: {said(code)}"
    code = init(0)
    if code != 0:
        facts["init"], facts["init_code"] = said(code), code
        return facts
    count = c_int(0)
    code = get_count(ctypes.byref(count))
    if code != 0:
        facts["init"], facts["init_code"] = f"cuDeviceGetCount: {said(code)}", code
        return facts
    gpus = []
    for ordinal in range(max(0, min(count.value, 1024))):
        device, major, minor = c_int(0), c_int(-1), c_int(-1)
        name = ctypes.create_string_buffer(NAME_BUFFER)
        if get_device(ctypes.byref(device), ordinal) != 0:
            continue
        ok_major = get_attribute(ctypes.byref(major), CU_ATTRIBUTE_MAJOR, device.value) == 0
        ok_minor = get_attribute(ctypes.byref(minor), CU_ATTRIBUTE_MINOR, device.value) == 0
        named = get_name(name, NAME_BUFFER, device.value) == 0
        gpus.append({"name": name.value.decode("utf-8", "replace") if named else "",
                     "major": major.value if ok_major else None,
                     "minor": minor.value if ok_minor else None})
    facts["gpus"] = gpus
    return facts


def _cuda_error_name(lib: ctypes.CDLL, code: int) -> str:
    try:
        name_of = _function(lib, "cuGetErrorName", ctypes.c_int, ctypes.c_int,
                            ctypes.POINTER(ctypes.c_char_p))
    except AttributeError:
        return "CUDA error"
    text = ctypes.c_char_p()
    if name_of(code, ctypes.byref(text)) != 0 or not text.value:
        return "CUDA error"
    return text.value.decode("ascii", "replace")


def _nvml_facts(library: str) -> dict[str, Any]:
    lib = _load(library)
    if isinstance(lib, str):
        return {"load_error": lib}
    c_int, c_uint = ctypes.c_int, ctypes.c_uint
    p_int, p_uint = ctypes.POINTER(c_int), ctypes.POINTER(c_uint)
    try:
        init = _function(lib, "nvmlInit_v2", c_int)
        shutdown = _function(lib, "nvmlShutdown", c_int)
        get_driver = _function(lib, "nvmlSystemGetDriverVersion", c_int, ctypes.c_char_p, c_uint)
        get_count = _function(lib, "nvmlDeviceGetCount_v2", c_int, p_uint)
        get_handle = _function(lib, "nvmlDeviceGetHandleByIndex_v2", c_int, c_uint,
                               ctypes.POINTER(ctypes.c_void_p))
        get_capability = _function(lib, "nvmlDeviceGetCudaComputeCapability", c_int,
                                   ctypes.c_void_p, p_int, p_int)
        get_name = _function(lib, "nvmlDeviceGetName", c_int, ctypes.c_void_p, ctypes.c_char_p,
                             c_uint)
    except AttributeError as error:
        return {"load_error": f"not NVML: {error}"}
    try:
        get_cuda = _function(lib, "nvmlSystemGetCudaDriverVersion_v2", c_int, p_int)
    except AttributeError:
        get_cuda = None

    def said(code: int) -> str:
        try:
            text = _function(lib, "nvmlErrorString", ctypes.c_char_p, c_int)(code)
        except AttributeError:
            text = None
        return f"{text.decode('ascii', 'replace') if text else 'NVML error'} ({code})"

    code = init()
    if code != 0:
        return {"error": f"nvmlInit_v2 failed: {said(code)}"}
    facts: dict[str, Any] = {}
    try:
        buffer = ctypes.create_string_buffer(NVML_DRIVER_BUFFER)
        if get_driver(buffer, NVML_DRIVER_BUFFER) == 0:
            facts["driver"] = buffer.value.decode("ascii", "replace")
        cuda = c_int(0)
        if get_cuda is not None and get_cuda(ctypes.byref(cuda)) == 0:
            facts["cuda"] = cuda.value
        count = c_uint(0)
        code = get_count(ctypes.byref(count))
        if code != 0:
            facts["error"] = f"nvmlDeviceGetCount_v2 failed: {said(code)}"
            return facts
        gpus = []
        for index in range(min(count.value, 1024)):
            handle = ctypes.c_void_p()
            if get_handle(index, ctypes.byref(handle)) != 0:
                continue
            major, minor = c_int(-1), c_int(-1)
            known = get_capability(handle, ctypes.byref(major), ctypes.byref(minor)) == 0
            name = ctypes.create_string_buffer(NVML_NAME_BUFFER)
            named = get_name(handle, name, NVML_NAME_BUFFER) == 0
            gpus.append({"name": name.value.decode("utf-8", "replace") if named else "",
                         "major": major.value if known else None,
                         "minor": minor.value if known else None})
        facts["gpus"] = gpus
        return facts
    finally:
        shutdown()

