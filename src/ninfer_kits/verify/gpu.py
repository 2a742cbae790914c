"""The GPU side of `verify` on a host: the NVIDIA driver and each GPU, and whether a kit's CUDA
runtime and device code can run on them, as the CUDA driver would decide.

Probing (`probe_host`), cheapest and most certain first, each step only when the earlier ones
left something unknown:

1. `/proc/driver/nvidia/version`: the kernel module's version (a read of procfs, cannot block);
2. `libcuda.so.1` through ctypes: `cuDriverGetVersion` (the CUDA version this driver offers, e.g.
   13000; a forward-compatibility libcuda can offer more than the kernel module's branch), then
   `cuInit` and each device's name and compute capability. These are the GPUs the CUDA runtime
   itself sees (CUDA_VISIBLE_DEVICES applies);
3. `libnvidia-ml.so.1` (NVML) through ctypes: driver version, CUDA version, GPUs;
4. `nvidia-smi --query-gpu=driver_version,compute_cap,name --format=csv,noheader`.

Steps 2 and 3 run in a child Python process (a hung or crashing driver library cannot take
`verify` with it) and every child has a timeout; a probe that fails says why, and what stays
unknown ends up in `GpuReport.problems` ("… unknown, because …"), never as an exception.

Compatibility (`check_driver`, `check_gpu`, `check_gpus`, `check_gpu_side`): the driver must
offer the kit's CUDA major (minor version compatibility: any 13.x runtime on a 580+ driver;
data/cuda_drivers.toml); each GPU runs the kit natively when some SASS arch reaches its compute
capability, through PTX JIT (a slower first start) when some PTX arch does and the driver is new
enough to compile that PTX, and not at all otherwise. The arch rules are the floor's
(`inspector.floor`: `sm_XY` on X.Y and later X minors, `sm_XYa` on X.Y only, `sm_XYf` on the
X family from X.Y, `compute_XY` JIT-compiled for X.Y or higher, `compute_XYa`/`f` only for that
arch / family). PTX counts from `.nv_fatbin` and, unlike the floor's table, from
`__nv_relfatbin` too: the CUDA runtime JIT-links relocatable device code when the device-linked
image has no code for the GPU (seen on an H200; see `check_gpu`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ninfer_kits.inspector.floor import (
    GPU_ARCH,
    Reach,
    _describe_arch,
    _describe_reach,
    _reach,
    _union,
)

PROC_VERSION: Final = Path("/proc/driver/nvidia/version")
LIBCUDA: Final = "libcuda.so.1"
LIBNVML: Final = "libnvidia-ml.so.1"
NVIDIA_SMI: Final = "nvidia-smi"
SMI_QUERY: Final = ("--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader")
DEFAULT_TIMEOUT: Final = 20.0  # seconds per probe: cuInit on a host of 8 GPUs can take several

# cuDeviceGetAttribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h)
CU_ATTRIBUTE_MAJOR: Final = 75
CU_ATTRIBUTE_MINOR: Final = 76
CUDA_ERROR_NO_DEVICE: Final = 100
NVML_DRIVER_BUFFER: Final = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
NVML_NAME_BUFFER: Final = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE
NAME_BUFFER: Final = 256

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (…)  …"
# and the proprietary module's "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  …"
NVRM_LINE: Final = re.compile(
    r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(?P<version>\d+\.\d+(?:\.\d+)?)(?:\s|$)",
    re.MULTILINE)
DRIVER_VERSION: Final = re.compile(r"^\d+(?:\.\d+){0,2}$")
CAPABILITY: Final = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)$")
CUDA_VERSION: Final = re.compile(r"^(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)?$")
RELEASE_NAME: Final = re.compile(r"^(?:GA|Update [1-9]\d*)$")

# Statuses, in the words of verify's report (ok / too old / missing) plus the GPU's own.
OK: Final = "ok"
TOO_OLD: Final = "too old"
MISSING: Final = "missing"
CANNOT_RUN: Final = "cannot run"
UNKNOWN: Final = "unknown"

How = Literal["native", "ptx-jit", "none", "unknown"]


# --------------------------------------------------------------------------- what the host has


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
    """What the host has. `driver_version` is the driver's own number (580.159.04);
    `driver_cuda` the CUDA version its libcuda offers ((13, 0)), None when neither libcuda nor
    NVML said. `cuda_error`: libcuda loaded but cuInit failed with something other than "no
    device" (a user-space/kernel driver mismatch, …): the kit's CUDA runtime fails the same way.
    `problems`: what stayed unknown and why, one line each."""

    driver_version: str | None
    driver_source: str  # "/proc/driver/nvidia/version", "libnvidia-ml.so.1", "nvidia-smi", ""
    driver_cuda: tuple[int, int] | None
    gpus: tuple[Gpu, ...]
    gpu_source: str  # "libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi", ""
    cuda_error: str | None
    problems: tuple[str, ...]
    no_driver: bool = False  # nothing of a driver at all: no module, no libcuda, no nvidia-smi


def parse_proc_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version, or None when no NVRM line has one."""
    match = NVRM_LINE.search(text)
    return match["version"] if match else None


def parse_cuda_version(value: int) -> tuple[int, int] | None:
    """cuDriverGetVersion's and NVML's form: 1000 × major + 10 × minor (13000 → 13.0)."""
    if value <= 0:
        return None
    return value // 1000, (value % 1000) // 10


def parse_nvidia_smi(text: str) -> tuple[str | None, tuple[Gpu, ...], tuple[str, ...]]:
    """`nvidia-smi --query-gpu=driver_version,compute_cap,name --format=csv,noheader`: one
    line a GPU, "580.159.04, 9.0, NVIDIA H200" (the name last: it is the only field that could
    hold a comma). Returns the driver version, the GPUs and the lines it could not read."""
    driver: str | None = None
    gpus: list[Gpu] = []
    unread: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",", 2)]
        if len(fields) != 3 or DRIVER_VERSION.match(fields[0]) is None:
            unread.append(_clean(line.strip()))
            continue
        driver = driver or fields[0]
        cap = CAPABILITY.match(fields[1])
        gpus.append(Gpu(index=len(gpus), name=_clean(fields[2]) or "unnamed GPU",
                        major=int(cap["major"]) if cap else None,
                        minor=int(cap["minor"]) if cap else None))
    return driver, tuple(gpus), tuple(unread)


def probe_host(*, proc_version: Path = PROC_VERSION, libcuda: str | None = LIBCUDA,
               libnvml: str | None = LIBNVML, nvidia_smi: str | None = NVIDIA_SMI,
               timeout: float = DEFAULT_TIMEOUT) -> GpuReport:
    """Find this host's driver and GPUs (see the module's docstring). A library or program
    given as None is not tried; a library name without a slash is found as dlopen finds it."""
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
        smi_driver, smi_gpus, failure, missing = _nvidia_smi(nvidia_smi, timeout)
        absent += missing
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
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "" if visible is None else f", with CUDA_VISIBLE_DEVICES={_clean(visible)!r}"


def _and(reasons: Sequence[str]) -> str:
    reasons = list(dict.fromkeys(reasons)) or ["nothing was probed"]
    return reasons[0] if len(reasons) == 1 else "; ".join(reasons[:-1]) + "; and " + reasons[-1]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _clean(text: str) -> str:
    """Text from a driver, as it can be shown on one line."""
    return "".join(char if char.isprintable() else "?" for char in text)[:200]


def _gpus(raw: object) -> tuple[Gpu, ...]:
    """The child's list, checked: it is another process's output."""
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
                        name=_clean(name) if isinstance(name, str) and name else "unnamed GPU",
                        major=major if known else None, minor=minor if known else None))
    return tuple(gpus)


# --------------------------------------------------------------------------- bounded children


@dataclass(frozen=True)
class _Answer:
    facts: Mapping[str, Any]
    failure: str | None = None
    absent: bool = False  # the library is not there at all


_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from ninfer_kits.verify.gpu import _child_main; _child_main(sys.argv[2], sys.argv[3])")


def _probe_in_child(kind: Literal["cuda", "nvml"], library: str, timeout: float) -> _Answer:
    """Run `_libcuda_facts` or `_nvml_facts` in a child Python, within `timeout` seconds."""
    package_parent = str(Path(__file__).resolve().parents[2])
    command = [sys.executable, "-I", "-c", _CHILD, package_parent, kind, library]
    code, out, err, timed_out = _run_bounded(command, timeout)
    if timed_out:
        return _Answer({}, f"{library} did not answer within {timeout:g} s (killed)")
    try:
        facts = json.loads(out) if code == 0 else None
    except ValueError:
        facts = None
    if not isinstance(facts, dict):
        how = (f"was killed by signal {-code}" if code < 0 else f"exited with status {code}")
        last = _clean(err.strip().splitlines()[-1]) if err.strip() else "no message"
        return _Answer({}, f"probing {library} failed: the probe {how} ({last})")
    load = facts.get("load_error")
    if isinstance(load, str):
        return _Answer({}, f"{library} could not be loaded ({_clean(load)})",
                       absent="cannot open shared object file" in load)
    return _Answer(facts)


def _run_bounded(command: Sequence[str], timeout: float) -> tuple[int, str, str, bool]:
    """Run a command; on timeout kill its process group and never wait for it long. Returns
    (status, stdout, stderr, timed out)."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        try:  # a child stuck in the kernel (D state) may not die at once: do not wait for it
            process.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        return -signal.SIGKILL, "", "", True
    return (process.returncode, out.decode("utf-8", "replace")[:1 << 20],
            err.decode("utf-8", "replace")[-4096:], False)


def _nvidia_smi(program: str, timeout: float) -> tuple[str | None, tuple[Gpu, ...], str | None,
                                                        bool]:
    """(driver, GPUs, why it failed or None, whether nvidia-smi is absent)."""
    found = shutil.which(program)
    if found is None:
        return None, (), f"{program} is not on the PATH", True
    try:
        code, out, err, timed_out = _run_bounded([found, *SMI_QUERY], timeout)
    except OSError as error:
        return None, (), f"{program} could not be run ({error.strerror or error})", False
    if timed_out:
        return None, (), f"{program} did not answer within {timeout:g} s (killed)", False
    if code != 0:
        said = (out.strip() or err.strip() or "no message").splitlines()[0]
        return None, (), f"{program} failed with status {code} ({_clean(said)})", False
    driver, gpus, unread = parse_nvidia_smi(out)
    if unread and not gpus:
        return None, (), f"{program} printed what this tool cannot read ({unread[0]})", False
    return driver, gpus, None, False


def _child_main(kind: str, library: str) -> None:
    """The child's whole job: probe one library, print one JSON object."""
    facts = _libcuda_facts(library) if kind == "cuda" else _nvml_facts(library)
    sys.stdout.write(json.dumps(facts))


def _load(library: str) -> ctypes.CDLL | str:
    try:
        return ctypes.CDLL(library)
    except OSError as error:
        return str(error)


def _function(lib: ctypes.CDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    """A C function with its signature set (ctypes would otherwise guess ints)."""
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


def _libcuda_facts(library: str) -> dict[str, Any]:
    """libcuda through its C API (cuda.h): the CUDA version, then cuInit and every device."""
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
    """NVML's C API (nvml.h): driver version, CUDA version, each device's name and capability."""
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


# --------------------------------------------------------------------------- cuda_drivers.toml


@dataclass(frozen=True)
class CudaRelease:
    cuda: tuple[int, int]
    release: str  # "GA", "Update 2"
    driver: str  # the minimum Linux x86-64 driver, "580.65.06"

    @property
    def label(self) -> str:
        return f"CUDA {self.cuda[0]}.{self.cuda[1]} {self.release}"


@dataclass(frozen=True)
class CudaDrivers:
    majors: tuple[tuple[int, str], ...]  # (13, "580"): the floor of minor version compatibility
    releases: tuple[CudaRelease, ...]  # newest first

    def major_floor(self, major: int) -> str | None:
        return dict(self.majors).get(major)

    def first_of(self, cuda: tuple[int, int]) -> CudaRelease | None:
        """The first release (GA) of a CUDA minor: the driver it shipped with."""
        found = [release for release in self.releases if release.cuda == cuda]
        return found[-1] if found else None

    def cuda_of(self, driver: str) -> tuple[tuple[int, int] | None, bool]:
        """The CUDA version a driver offers: the newest release whose minimum it meets, and
        whether it may offer more (it is newer than every release in the table)."""
        version = driver_tuple(driver)
        newest = self.releases[0]
        for release in self.releases:
            if version >= driver_tuple(release.driver):
                return release.cuda, release is newest and version > driver_tuple(newest.driver)
        return None, False


def driver_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@functools.cache
def cuda_drivers() -> CudaDrivers:
    path = Path(__file__).resolve().parent.parent / "data" / "cuda_drivers.toml"
    return _validate(tomllib.loads(path.read_text(encoding="utf-8")), path.name)


def _validate(raw: Mapping[str, Any], name: str) -> CudaDrivers:
    if raw.get("schema") != 1:
        raise ValueError(f"{name}: unsupported schema {raw.get('schema')!r}")
    majors_raw = raw.get("majors")
    if not isinstance(majors_raw, dict) or not majors_raw:
        raise ValueError(f"{name}: [majors.N] tables are required")
    majors: dict[int, str] = {}
    for key, table in majors_raw.items():
        driver = table.get("driver") if isinstance(table, dict) else None
        if not key.isdigit() or not isinstance(driver, str) or not DRIVER_VERSION.match(driver):
            raise ValueError(f"{name}: [majors.{key}] needs a numeric major and a driver "
                             f"version such as \"580\" or \"450.80.02\"")
        majors[int(key)] = driver
    releases: list[CudaRelease] = []
    for index, entry in enumerate(raw.get("releases", []), start=1):
        where = f"{name}: [[releases]] #{index}"
        if not isinstance(entry, dict) or set(entry) != {"cuda", "release", "driver"}:
            raise ValueError(f"{where}: needs exactly cuda, release and driver")
        cuda, release, driver = entry["cuda"], entry["release"], entry["driver"]
        match = CUDA_VERSION.match(cuda) if isinstance(cuda, str) else None
        if match is None or match["minor"] is None or cuda.count(".") != 1:
            raise ValueError(f"{where}: cuda must be MAJOR.MINOR, not {cuda!r}")
        if not isinstance(release, str) or RELEASE_NAME.match(release) is None:
            raise ValueError(f"{where}: release must be \"GA\" or \"Update N\", not {release!r}")
        if not isinstance(driver, str) or DRIVER_VERSION.match(driver) is None:
            raise ValueError(f"{where}: driver must be a version such as 580.65.06")
        item = CudaRelease((int(match["major"]), int(match["minor"])), release, driver)
        floor = majors.get(item.cuda[0])
        if floor is None:
            raise ValueError(f"{where}: CUDA {cuda} has no [majors.{item.cuda[0]}]")
        if driver_tuple(driver) < driver_tuple(floor):
            raise ValueError(f"{where}: driver {driver} is below CUDA {item.cuda[0]}'s "
                             f"floor {floor}")
        if releases:
            newer = releases[-1]
            order = (item.cuda, _update(item.release))
            if order >= (newer.cuda, _update(newer.release)):
                raise ValueError(f"{where}: {item.label} must come after {newer.label} "
                                 f"(newest first)")
            if driver_tuple(driver) > driver_tuple(newer.driver):
                raise ValueError(f"{where}: {item.label} needs {driver}, more than the later "
                                 f"{newer.label} ({newer.driver})")
        releases.append(item)
    if not releases:
        raise ValueError(f"{name}: no [[releases]]")
    return CudaDrivers(majors=tuple(sorted(majors.items(), reverse=True)),
                       releases=tuple(releases))


def _update(release: str) -> int:
    return 0 if release == "GA" else int(release.split()[1])


# --------------------------------------------------------------------------- will the kit run


@dataclass(frozen=True)
class DriverCheck:
    """The driver against the kit's CUDA runtime: a row of verify's report."""

    requirement: str
    found: str
    status: str  # OK, TOO_OLD, MISSING, CANNOT_RUN (cuInit fails), UNKNOWN
    fix: str = ""


@dataclass(frozen=True)
class GpuCheck:
    """One GPU against the kit's device code: a row of verify's report, and how it runs."""

    gpu: Gpu
    how: How  # "native" (SASS), "ptx-jit" (the driver compiles PTX at start), "none", "unknown"
    code: str | None  # the arch that serves it: "sm_86", "compute_86"
    requirement: str
    found: str
    status: str  # OK (native or PTX JIT), CANNOT_RUN, UNKNOWN
    fix: str = ""


@dataclass(frozen=True)
class GpuSide:
    """The whole GPU side: the driver row, then one row a GPU. `runs` says whether the kit can
    run here (on at least one GPU), None when that is unknown."""

    driver: DriverCheck
    gpus: tuple[GpuCheck, ...]
    missing_gpu: str = ""  # why there is no GPU row: "no GPU found, because …"

    @property
    def runs(self) -> bool | None:
        if self.driver.status in (TOO_OLD, MISSING, CANNOT_RUN):
            return False
        if any(check.status == OK for check in self.gpus):
            return None if self.driver.status == UNKNOWN else True
        if self.gpus and all(check.status == CANNOT_RUN for check in self.gpus):
            return False
        return False if self.missing_gpu.startswith("no GPU") else None


def kit_cuda_version(text: str | int) -> tuple[int, int | None]:
    """The kit's CUDA version from BUILDINFO's cuda_version ("13.0.88") or the runtime's soname
    major ("13", 13): (13, 0) or (13, None)."""
    match = CUDA_VERSION.match(str(text).strip())
    if match is None:
        raise ValueError(f"not a CUDA version: {text!r}")
    minor = match["minor"]
    return int(match["major"]), None if minor is None else int(minor)


def check_driver(report: GpuReport, kit_cuda: str | int,
                 table: CudaDrivers | None = None) -> DriverCheck:
    """Does the driver run the kit's CUDA runtime? Minor version compatibility: CUDA 13.x needs
    a driver offering CUDA 13.0 or later (580 or newer); a newer major's driver runs it too."""
    table = table or cuda_drivers()
    major, _ = kit_cuda_version(kit_cuda)
    floor = table.major_floor(major)
    first = table.first_of((major, 0))
    floor_text = f" (driver ≥ {floor} on Linux x86-64)" if floor else ""
    requirement = f"An NVIDIA driver for CUDA {major}{floor_text}"
    install = (f"install an NVIDIA driver of the {floor.split('.')[0]} branch or newer"
               + (f" ({first.driver} shipped with {first.label})" if first else "")
               if floor else f"install an NVIDIA driver for CUDA {major} or newer")
    found = _driver_found(report, table)
    if report.cuda_error is not None:
        return DriverCheck(requirement, f"{found}; {report.cuda_error}", CANNOT_RUN,
                           "the CUDA runtime fails the same way when the kit starts: check that "
                           "the driver's user-space libraries match its kernel module (reboot "
                           "after a driver update), and that the GPU is visible to this user")
    offered, more = _offered_cuda(report, table)
    if offered is None:
        if report.no_driver:
            return DriverCheck(requirement, "none: " + "; ".join(report.problems), MISSING,
                               install)
        return DriverCheck(requirement, found or "; ".join(report.problems), UNKNOWN)
    if offered[0] >= major:
        return DriverCheck(requirement, found, OK)
    if more:  # a driver newer than the table knows: it may well offer the kit's major
        return DriverCheck(requirement, found, UNKNOWN,
                           f"check the driver's CUDA version: this table ends at "
                           f"{table.releases[0].label}")
    return DriverCheck(requirement, found, TOO_OLD, install)


def _offered_cuda(report: GpuReport,
                  table: CudaDrivers) -> tuple[tuple[int, int] | None, bool]:
    """The CUDA version the driver offers: libcuda's own word first (a forward-compatibility
    libcuda offers more than its kernel module's branch), else the driver's version looked up."""
    if report.driver_cuda is not None:
        return report.driver_cuda, False
    if report.driver_version is not None:
        return table.cuda_of(report.driver_version)
    return None, False


def _driver_found(report: GpuReport, table: CudaDrivers) -> str:
    parts = []
    if report.driver_version is not None:
        cuda, more = table.cuda_of(report.driver_version)
        if report.driver_cuda is not None:
            cuda, more = report.driver_cuda, False
        offers = f" (CUDA {cuda[0]}.{cuda[1]}{' or newer' if more else ''})" if cuda else ""
        parts.append(f"{report.driver_version}{offers}, from {report.driver_source}")
    elif report.driver_cuda is not None:
        major, minor = report.driver_cuda
        parts.append(f"a driver offering CUDA {major}.{minor} (cuDriverGetVersion)")
    return "; ".join(parts)


def check_gpu(gpu: Gpu, sass: Sequence[str], ptx: Sequence[str],
              relocatable: Sequence[str] = (), *, kit_cuda: str | int | None = None,
              driver_cuda: tuple[int, int] | None = None,
              table: CudaDrivers | None = None) -> GpuCheck:
    """How one GPU runs the kit's device code: `sass` and `ptx` as the CUDA runtime loads them
    (KitFloor.sass, .ptx: `.nv_fatbin`), `relocatable` the archs of the device-link inputs
    (KitFloor.relocatable: `__nv_relfatbin`, from separable compilation).

    SASS that reaches the GPU's compute capability runs natively. Else PTX that reaches it is
    JIT-compiled by the driver when the program starts: loaded PTX, or else the relocatable
    PTX, which the CUDA runtime JIT-compiles and links when the device-linked image has no code
    for the GPU (nvcc's link.stub hands the runtime every object's relocatable fatbin with the
    linked one; seen on an H200: a separable-compilation sm_86 build with no PTX in
    `.nv_fatbin` ran, and failed with "PTX JIT compilation was disabled" under
    CUDA_DISABLE_PTX_JIT=1). The driver (`driver_cuda`) must be at least the CUDA version that
    generated the PTX (`kit_cuda`, the kit's toolkit: a 580 driver cannot compile CUDA 13.1's
    PTX)."""
    relocatable_ptx = [arch for arch in relocatable if arch.startswith("compute_")]
    requirement = gpu_requirement(sass, ptx, relocatable)
    cap = gpu.capability
    if cap is None:
        return GpuCheck(gpu, "unknown", None, requirement, gpu.shown, UNKNOWN)
    capability = f"{cap[0]}.{cap[1]}"
    native = [arch for arch in sass if _runs_on(arch, cap)]
    if native:
        return GpuCheck(gpu, "native", native[-1], requirement,
                        f"{gpu.shown}: runs natively (SASS {native[-1]})", OK)
    no_sass = f"no SASS for {capability}" + _listed(sass)
    loaded = [arch for arch in ptx if _runs_on(arch, cap)]
    linked = [arch for arch in relocatable_ptx if _runs_on(arch, cap)]
    if loaded or linked:
        arch = _newest(loaded or linked)
        how = (f"the driver compiles PTX {arch} for it" if loaded else
               f"the CUDA runtime JIT-compiles and links the relocatable device code (PTX {arch} "
               f"in __nv_relfatbin) for it")
        made_by = kit_cuda_version(kit_cuda) if kit_cuda is not None else None
        if made_by is not None and made_by[1] is not None and driver_cuda is not None \
                and driver_cuda < (made_by[0], made_by[1]):
            first = (table or cuda_drivers()).first_of((made_by[0], made_by[1]))
            need = f" (≥ {first.driver}, as {first.label} shipped)" if first else ""
            return GpuCheck(
                gpu, "none", arch, requirement,
                f"{gpu.shown}: {no_sass}; PTX {arch} comes from CUDA "
                f"{made_by[0]}.{made_by[1]}, and a driver offering CUDA "
                f"{driver_cuda[0]}.{driver_cuda[1]} cannot JIT-compile it "
                f"(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)", CANNOT_RUN,
                f"update the driver to one for CUDA {made_by[0]}.{made_by[1]} or newer{need}, "
                f"or use a kit with SASS for {_sm(cap)}")
        return GpuCheck(gpu, "ptx-jit", arch, requirement,
                        f"{gpu.shown}: runs through PTX JIT ({no_sass}; {how} when the program "
                        f"starts, so the first start is slower; later starts reuse the "
                        f"driver's JIT cache)", OK)
    every_ptx = [*ptx, *relocatable_ptx]
    no_ptx = ("no PTX it can JIT-compile for it" + _listed(every_ptx) if every_ptx else
              "no PTX, so the driver cannot JIT-compile kernels for it")
    # What the first launch says (seen on the H200): a device-linked program without code for
    # the GPU cannot find its kernel's symbol.
    error = "named symbol not found" if relocatable else \
        "no kernel image is available for execution on the device"
    return GpuCheck(gpu, "none", None, requirement,
                    f"{gpu.shown}: cannot run: {no_sass}; {no_ptx} (the first kernel launch "
                    f"fails with \"{error}\")", CANNOT_RUN,
                    f"use a kit built for {_sm(cap)}, or one carrying PTX for "
                    f"{capability} or lower")


def check_gpus(report: GpuReport, sass: Sequence[str], ptx: Sequence[str],
               relocatable: Sequence[str] = (), *, kit_cuda: str | int | None = None,
               table: CudaDrivers | None = None) -> tuple[GpuCheck, ...]:
    table = table or cuda_drivers()
    driver_cuda, _ = _offered_cuda(report, table)
    return tuple(check_gpu(gpu, sass, ptx, relocatable, kit_cuda=kit_cuda,
                           driver_cuda=driver_cuda, table=table) for gpu in report.gpus)


def check_gpu_side(report: GpuReport, kit_cuda: str | int, sass: Sequence[str],
                   ptx: Sequence[str], relocatable: Sequence[str] = (),
                   table: CudaDrivers | None = None) -> GpuSide:
    """The driver row and one row a GPU, for a kit of CUDA `kit_cuda` (BUILDINFO's
    cuda_version, or the libcudart.so.N major) with device code `sass`/`ptx` (loaded) and
    `relocatable` (the archs of its `__nv_relfatbin` entries, SASS and PTX)."""
    table = table or cuda_drivers()
    missing = next((problem for problem in report.problems if "GPU" in problem), "")
    return GpuSide(driver=check_driver(report, kit_cuda, table),
                   gpus=check_gpus(report, sass, ptx, relocatable, kit_cuda=kit_cuda,
                                   table=table),
                   missing_gpu="" if report.gpus else missing or "no GPU found")


def gpu_requirement(sass: Sequence[str], ptx: Sequence[str],
                    relocatable: Sequence[str] = ()) -> str:
    """"An NVIDIA GPU of compute capability 8.6 or a later 8.x": the floor's wording, over the
    SASS and PTX that can run (relocatable PTX included: the runtime JIT-links it)."""
    linkable = [arch for arch in relocatable if arch.startswith("compute_")]
    reaches = [reach for arch in (*sass, *ptx, *linkable) if (reach := _reach(arch)) is not None]
    label = ", or ".join(_describe_reach(reach) for reach in _union(reaches))
    return f"An NVIDIA GPU of compute capability {label or 'unknown'}"


def _listed(archs: Sequence[str]) -> str:
    return " (" + "; ".join(_describe_arch(arch) for arch in archs) + ")" if archs else ""


def _runs_on(arch: str, capability: tuple[int, int]) -> bool:
    reach: Reach | None = _reach(arch)
    return reach is not None and reach.low <= capability <= reach.high


def _newest(archs: Sequence[str]) -> str:
    """Of the PTX that fits, the newest arch: what the CUDA runtime picks to JIT-compile."""
    def number(arch: str) -> int:
        match = GPU_ARCH.match(arch)
        return int(match["number"]) if match else 0
    return max(archs, key=number)


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"
