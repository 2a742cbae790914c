"""The GPU side of verify: finding the driver and the GPUs, and whether a kit runs on them.

This machine has no GPU and no driver, so the probes run on what a real host gives, recorded
(tests/data/gpu/: /proc/driver/nvidia/version and nvidia-smi's CSV from the H200 host), and the
ctypes code runs against real shared libraries compiled here from tests/data/gpu/fake_*.c, which
export the driver's C symbols with its signatures and answer what the H200's libcuda.so.1 and
libnvidia-ml.so.1 answered there. The verdicts are checked against what programs and kits built
here did on that H200 (h200-jit-probe.txt, h200-example-kits.txt).
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.config.tables import Locator, Source, Table, read_data_file
from ninfer_kits.errors import ConfigError
from ninfer_kits.host.nvidia_smi import query_args as smi_query_args
from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.platforms import cuda_drivers as drivers
from ninfer_kits.platforms.cuda_drivers import cuda_drivers, kit_cuda_version
from ninfer_kits.verify import gpu_host
from ninfer_kits.verify.gpu import (
    CANNOT_RUN,
    MISSING,
    OK,
    TOO_OLD,
    UNKNOWN,
    check_driver,
    check_gpu,
    check_gpu_side,
    gpu_requirement,
)
from ninfer_kits.verify.gpu_host import (
    Gpu,
    GpuReport,
    parse_cuda_version,
    parse_nvidia_smi,
    parse_proc_version,
    probe_host,
)

from tools import DATA, nvcc, run, tool

RECORDED = DATA / "gpu"
H200_PROC = RECORDED / "h200-proc-driver-nvidia-version.txt"
H200_SMI = RECORDED / "h200-nvidia-smi-query.csv"
H200 = Gpu(index=0, name="NVIDIA H200", major=9, minor=0)
# What the H200 host's own libraries answered through this module's ctypes code (recorded there
# with _libcuda_facts("libcuda.so.1") and _nvml_facts("libnvidia-ml.so.1")).
H200_LIBCUDA = {"cuda": 13000, "gpus": [{"name": "NVIDIA H200", "major": 9, "minor": 0}]}
H200_NVML = {"driver": "580.159.04", "cuda": 13000,
             "gpus": [{"name": "NVIDIA H200", "major": 9, "minor": 0}]}
TWO_GPUS = "NVIDIA H200=9.0;NVIDIA GeForce RTX 3090=8.6"


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libcuda.so.1 and libnvidia-ml.so.1 compiled here, under their real sonames."""
    folder = tmp_path_factory.mktemp("fake-driver")
    cc = tool("gcc")
    built = {}
    for name, source in (("libcuda.so.1", "fake_libcuda.c"),
                         ("libnvidia-ml.so.1", "fake_nvml.c")):
        run(cc, "-Wall", "-Werror", "-shared", "-fPIC", "-o", folder / name, RECORDED / source,
            f"-Wl,-soname,{name}")
        built[name] = folder / name
    return built


@pytest.fixture(autouse=True)
def _no_fake_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAKE_CUDA_VERSION", "FAKE_CUDA_INIT", "FAKE_CUDA_HANG", "FAKE_CUDA_CRASH",
                 "FAKE_GPUS", "FAKE_NVML_DRIVER", "FAKE_NVML_CUDA", "FAKE_NVML_INIT",
                 "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def report(**fields: Any) -> GpuReport:
    base: dict[str, Any] = {"driver_version": "580.159.04",
                            "driver_source": "/proc/driver/nvidia/version",
                            "driver_cuda": (13, 0), "gpus": (H200,), "gpu_source": "libcuda.so.1",
                            "cuda_error": None, "problems": ()}
    return GpuReport(**{**base, **fields})


# --------------------------------------------------------------------------- recorded formats


def test_proc_version_recorded_on_the_h200() -> None:
    text = H200_PROC.read_text(encoding="utf-8")
    assert text.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04")
    assert parse_proc_version(text) == "580.159.04"


@pytest.mark.parametrize(("text", "version"), [
    # the proprietary module's form (a user's `cat /proc/driver/nvidia/version`, public README)
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022\n"
     "GCC version:  gcc version 7.5.0 (Ubuntu 7.5.0-3ubuntu1~18.04)\n", "515.76"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  "
     "(dvs-builder@U16-A24-1-1)  Thu Jul 10 2025\n", "580.65.06"),
    ("GCC version:  gcc version 15.3.0 (GCC)\n", None),
    ("NVRM version: something else entirely\n", None),
    ("", None),
])
def test_proc_version_forms(text: str, version: str | None) -> None:
    assert parse_proc_version(text) == version


def test_nvidia_smi_recorded_on_the_h200() -> None:
    text = H200_SMI.read_text(encoding="utf-8")
    assert text == "580.159.04, 9.0, NVIDIA H200\n"
    assert parse_nvidia_smi(text) == ("580.159.04", (H200,), ())


def test_nvidia_smi_several_gpus_and_odd_lines() -> None:
    text = ("580.159.04, 9.0, NVIDIA H200\n"
            "580.159.04, 8.6, Vendor GPU, rev 2\n"  # a comma in the name stays in the name
            "580.159.04, [N/A], NVIDIA Something\n"
            "\n"
            "No devices were found\n")
    driver, gpus, unread = parse_nvidia_smi(text)
    assert driver == "580.159.04"
    assert gpus == (H200, Gpu(1, "Vendor GPU, rev 2", 8, 6), Gpu(2, "NVIDIA Something", None, None))
    assert unread == ("No devices were found",)


@pytest.mark.parametrize(("value", "cuda"), [
    (13000, (13, 0)), (12080, (12, 8)), (13010, (13, 1)), (0, None), (-1, None)])
def test_cuda_version_numbers(value: int, cuda: tuple[int, int] | None) -> None:
    assert parse_cuda_version(value) == cuda


# --------------------------------------------------------------------------- ctypes, for real


def test_libcuda_through_ctypes(fake_driver: dict[str, Path],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GPUS", "NVIDIA H200=9.0")
    assert gpu_host._libcuda_facts(str(fake_driver["libcuda.so.1"])) == H200_LIBCUDA
    monkeypatch.setenv("FAKE_GPUS", TWO_GPUS)
    monkeypatch.setenv("FAKE_CUDA_VERSION", "12080")
    facts = gpu_host._libcuda_facts(str(fake_driver["libcuda.so.1"]))
    assert facts["cuda"] == 12080
    assert [(g["name"], g["major"], g["minor"]) for g in facts["gpus"]] == [
        ("NVIDIA H200", 9, 0), ("NVIDIA GeForce RTX 3090", 8, 6)]


def test_nvml_through_ctypes(fake_driver: dict[str, Path],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GPUS", "NVIDIA H200=9.0")
    assert gpu_host._nvml_facts(str(fake_driver["libnvidia-ml.so.1"])) == H200_NVML
    monkeypatch.setenv("FAKE_NVML_INIT", "9")
    assert gpu_host._nvml_facts(str(fake_driver["libnvidia-ml.so.1"])) == {
        "error": "nvmlInit_v2 failed: Driver Not Loaded (9)"}


def test_probe_host_as_on_the_h200(fake_driver: dict[str, Path],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver from /proc, the CUDA version and the GPUs from libcuda (in a child process);
    NVML and nvidia-smi are not needed, so not asked."""
    monkeypatch.setenv("FAKE_GPUS", TWO_GPUS)
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libcuda.so.1"]),
                       libnvml="/nonexistent/libnvidia-ml.so.1", nvidia_smi="/nonexistent/smi")
    assert found == GpuReport(
        driver_version="580.159.04", driver_source=str(H200_PROC), driver_cuda=(13, 0),
        gpus=(H200, Gpu(1, "NVIDIA GeForce RTX 3090", 8, 6)),
        gpu_source=str(fake_driver["libcuda.so.1"]), cuda_error=None, problems=())


def test_without_libcuda_nvml_answers(fake_driver: dict[str, Path], tmp_path: Path) -> None:
    found = probe_host(proc_version=tmp_path / "absent", libcuda=str(tmp_path / "libcuda.so.1"),
                       libnvml=str(fake_driver["libnvidia-ml.so.1"]), nvidia_smi=None)
    assert (found.driver_version, found.driver_source) == (
        "580.159.04", str(fake_driver["libnvidia-ml.so.1"]))
    assert found.driver_cuda == (13, 0)
    assert found.gpus == (H200, Gpu(1, "NVIDIA GeForce RTX 3090", 8, 6))
    assert found.problems == ()


def test_no_device_is_an_answer(fake_driver: dict[str, Path],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """libcuda saying "no device" is what the kit would see: NVML's list (all GPUs, whatever
    CUDA_VISIBLE_DEVICES says) does not replace it."""
    monkeypatch.setenv("FAKE_CUDA_INIT", "100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libcuda.so.1"]),
                       libnvml=str(fake_driver["libnvidia-ml.so.1"]), nvidia_smi=None)
    assert found.gpus == ()
    assert found.cuda_error is None
    assert found.problems == (
        f"no GPU found, because {fake_driver['libcuda.so.1']} sees no GPU (cuInit: "
        "CUDA_ERROR_NO_DEVICE (100)), with CUDA_VISIBLE_DEVICES=''",)
    side = check_gpu_side(found, "13.0.88", ("sm_86",), ("compute_86",))
    assert (side.driver.status, side.gpus, side.runs) == (OK, (), False)


def test_a_failing_cuinit_fails_the_driver(fake_driver: dict[str, Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CUDA_INIT", "803")
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libcuda.so.1"]),
                       libnvml=str(fake_driver["libnvidia-ml.so.1"]), nvidia_smi=None)
    assert found.cuda_error == "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)"
    assert found.gpu_source == str(fake_driver["libnvidia-ml.so.1"])  # the GPUs, from NVML
    assert len(found.gpus) == 2
    driver = check_driver(found, "13.0.88")
    assert driver.status == CANNOT_RUN
    assert "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in driver.found
    assert "kernel module" in driver.fix
    assert check_gpu_side(found, "13.0.88", ("sm_86",), ()).runs is False


def test_a_hanging_libcuda_is_killed(fake_driver: dict[str, Path],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CUDA_HANG", "1")
    started = time.monotonic()
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libcuda.so.1"]),
                       libnvml=None, nvidia_smi=None, timeout=1.5)
    assert time.monotonic() - started < 10
    assert found.driver_version == "580.159.04"
    assert found.problems == (f"GPUs unknown, because {fake_driver['libcuda.so.1']} did not "
                              f"answer within 1.5 s (killed)",)
    side = check_gpu_side(found, "13.0.88", ("sm_86",), ())
    assert side.driver.status == OK
    assert side.runs is None
    assert side.missing_gpu.startswith("GPUs unknown, because")


def test_a_crashing_libcuda_is_reported(fake_driver: dict[str, Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CUDA_CRASH", "1")
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libcuda.so.1"]),
                       libnvml=None, nvidia_smi=None)
    assert found.gpus == ()
    assert f"probing {fake_driver['libcuda.so.1']} failed: the probe was killed by signal 11" \
        in found.problems[0]


def test_a_library_that_is_not_the_driver(fake_driver: dict[str, Path]) -> None:
    found = probe_host(proc_version=H200_PROC, libcuda=str(fake_driver["libnvidia-ml.so.1"]),
                       libnvml=None, nvidia_smi=None)
    assert "could not be loaded (not a CUDA driver library: " in found.problems[0]
    assert "cuDriverGetVersion" in found.problems[0]


# --------------------------------------------------------------------------- nvidia-smi


def test_nvidia_smi_as_the_last_resort(tmp_path: Path) -> None:
    smi = script(tmp_path, "nvidia-smi",
                 f'[ "$1 $2" = "{" ".join(smi_query_args(gpu_host.SMI_FIELDS))}" ] || exit 2\n'
                 f"cat '{H200_SMI}'")
    found = probe_host(proc_version=tmp_path / "absent", libcuda=None, libnvml=None,
                       nvidia_smi=smi)
    assert (found.driver_version, found.driver_source) == ("580.159.04", "nvidia-smi")
    assert (found.gpus, found.gpu_source, found.driver_cuda) == ((H200,), "nvidia-smi", None)
    assert found.problems == ()
    assert check_driver(found, "13").status == OK  # 580.159.04 looked up: CUDA 13.0


def test_nvidia_smi_failing_says_what_it_said(tmp_path: Path) -> None:
    smi = script(tmp_path, "nvidia-smi",
                 "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                 "driver. Make sure that the latest NVIDIA driver is installed and running.\"\n"
                 "exit 9")
    found = probe_host(proc_version=tmp_path / "absent", libcuda=str(tmp_path / "libcuda.so.1"),
                       libnvml=None, nvidia_smi=smi)
    assert found.problems[0].startswith(
        f"driver version unknown, because {tmp_path / 'absent'} is absent (no NVIDIA kernel "
        f"module is loaded); {tmp_path / 'libcuda.so.1'} could not be loaded (")
    assert found.problems[0].endswith(
        f"; and {smi} failed with status 9 (NVIDIA-SMI has failed because it couldn't "
        "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is "
        "installed and running.)")
    assert not found.no_driver  # nvidia-smi is there: a broken driver, not none
    assert check_driver(found, "13").status == UNKNOWN


def test_a_hanging_nvidia_smi_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    smi = script(tmp_path, "nvidia-smi", f"sleep 30; touch '{marker}'")
    started = time.monotonic()
    found = probe_host(proc_version=H200_PROC, libcuda=None, libnvml=None, nvidia_smi=smi,
                       timeout=1)
    assert time.monotonic() - started < 10
    assert found.problems == (f"GPUs unknown, because {smi} did not answer within 1 s (killed)",)
    time.sleep(0.2)
    assert not marker.exists()


def test_no_driver_at_all(tmp_path: Path) -> None:
    found = probe_host(proc_version=tmp_path / "absent", libcuda=str(tmp_path / "libcuda.so.1"),
                       libnvml=str(tmp_path / "libnvidia-ml.so.1"),
                       nvidia_smi=str(tmp_path / "nvidia-smi"))
    assert found.no_driver
    assert (found.driver_version, found.driver_cuda, found.gpus) == (None, None, ())
    assert [problem.split(",")[0] for problem in found.problems] == [
        "driver version unknown", "GPUs unknown"]
    side = check_gpu_side(found, "13.0.88", ("sm_86",), ())
    assert side.driver.status == MISSING
    assert side.driver.fix == ("install an NVIDIA driver of the 580 branch or newer "
                               "(580.65.06 shipped with CUDA 13.0 GA)")
    assert side.runs is False


def test_this_host_answers_without_raising() -> None:
    found = probe_host(timeout=10)
    assert isinstance(found, GpuReport)
    if not gpu_host.PROC_VERSION.exists():
        assert found.driver_source != str(gpu_host.PROC_VERSION)


# --------------------------------------------------------------------------- will it run


# (SASS, PTX, the GPU's compute capability, how it runs, the arch that serves it); relocatable
# device code in RELOCATABLE_CASES below
CASES: list[tuple[tuple[str, ...], tuple[str, ...], tuple[int, int], str, str | None]] = [
    (("sm_86",), (), (8, 6), "native", "sm_86"),
    (("sm_86",), (), (8, 9), "native", "sm_86"),
    (("sm_86",), (), (9, 0), "none", None),
    (("sm_86",), (), (8, 0), "none", None),
    (("sm_120a",), (), (12, 0), "native", "sm_120a"),
    (("sm_120a",), (), (12, 1), "none", None),
    (("sm_100f",), (), (10, 0), "native", "sm_100f"),
    (("sm_100f",), (), (10, 3), "native", "sm_100f"),
    (("sm_100f",), (), (12, 0), "none", None),
    (("sm_86",), ("compute_86",), (9, 0), "ptx-jit", "compute_86"),
    (("sm_86",), ("compute_86",), (12, 0), "ptx-jit", "compute_86"),
    (("sm_86",), ("compute_86",), (8, 9), "native", "sm_86"),
    (("sm_86",), ("compute_86",), (8, 0), "none", None),
    ((), ("compute_120a",), (12, 1), "none", None),
    ((), ("compute_120a",), (12, 0), "ptx-jit", "compute_120a"),
    ((), ("compute_100f",), (10, 3), "ptx-jit", "compute_100f"),
    ((), ("compute_100f",), (11, 0), "none", None),
    (("sm_86", "sm_90"), ("compute_90",), (9, 0), "native", "sm_90"),
    (("sm_86",), ("compute_80", "compute_86"), (12, 0), "ptx-jit", "compute_86"),
]


@pytest.mark.parametrize(("sass", "ptx", "capability", "how", "code"), CASES)
def test_compatibility_rules(sass: tuple[str, ...], ptx: tuple[str, ...],
                             capability: tuple[int, int], how: str, code: str | None) -> None:
    check = check_gpu(Gpu(0, "GPU", *capability), sass, ptx, kit_cuda="13.0.88",
                      driver_cuda=(13, 0))
    assert (check.how, check.code) == (how, code)
    assert check.status == {"native": OK, "ptx-jit": OK, "none": CANNOT_RUN}[how]
    if how == "ptx-jit":
        assert "the first start is slower" in check.found
    if how == "none":
        assert "no kernel image is available for execution on the device" in check.found
        assert check.fix.startswith(f"use a kit built for sm_{capability[0]}{capability[1]}")


# (relocatable archs, the GPU's compute capability, how it runs, the arch that serves it), with
# SASS sm_86 loaded and no loaded PTX, as a separable-compilation build for sm_86 has
RELOCATABLE_CASES: list[tuple[tuple[str, ...], tuple[int, int], str, str | None]] = [
    (("sm_86", "compute_86"), (9, 0), "ptx-jit", "compute_86"),
    (("sm_86", "compute_86"), (8, 9), "native", "sm_86"),
    (("sm_86", "compute_86"), (8, 0), "none", None),
    (("sm_86",), (9, 0), "none", None),
    (("sm_86", "compute_86"), (12, 0), "ptx-jit", "compute_86"),
]


@pytest.mark.parametrize(("relocatable", "capability", "how", "code"), RELOCATABLE_CASES)
def test_relocatable_ptx_is_jit_linked(relocatable: tuple[str, ...], capability: tuple[int, int],
                                       how: str, code: str | None) -> None:
    check = check_gpu(Gpu(0, "GPU", *capability), ("sm_86",), (), relocatable,
                      kit_cuda="13.0.88", driver_cuda=(13, 0))
    assert (check.how, check.code) == (how, code)
    if how == "none":
        assert 'fails with "named symbol not found"' in check.found


def test_unknown_capability_is_unknown() -> None:
    check = check_gpu(Gpu(0, "GPU", None, None), ("sm_86",), ())
    assert (check.how, check.status) == ("unknown", UNKNOWN)


def test_ptx_newer_than_the_driver_is_not_compiled() -> None:
    """Minor version compatibility lets CUDA 13.1's runtime start on a 580 (CUDA 13.0) driver,
    but that driver cannot JIT-compile 13.1's PTX."""
    newer = check_gpu(H200, ("sm_86",), ("compute_86",), kit_cuda="13.1.115",
                      driver_cuda=(13, 0))
    assert (newer.how, newer.status) == ("none", CANNOT_RUN)
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in newer.found
    assert newer.fix.startswith("update the driver to one for CUDA 13.1 or newer (≥ 590.44.01, "
                                "as CUDA 13.1 GA shipped)")
    same = check_gpu(H200, ("sm_86",), ("compute_86",), kit_cuda="13.1.115", driver_cuda=(13, 1))
    assert same.how == "ptx-jit"
    unknown_minor = check_gpu(H200, ("sm_86",), ("compute_86",), kit_cuda=13,
                              driver_cuda=(13, 0))
    assert unknown_minor.how == "ptx-jit"
    from_table = check_gpu_side(report(driver_cuda=None), "13.1.115", ("sm_86",), ("compute_86",))
    assert from_table.gpus[0].status == CANNOT_RUN  # 580.159.04 looked up: CUDA 13.0


@pytest.mark.parametrize(("fields", "kit", "status"), [
    ({"driver_version": "575.57.08", "driver_cuda": None}, "13.0.88", TOO_OLD),
    ({"driver_version": "580.65.06", "driver_cuda": None}, "13.1.115", OK),
    ({"driver_version": "580.159.04", "driver_cuda": (13, 0)}, "13", OK),
    ({"driver_version": None, "driver_cuda": (12, 9)}, "13.0.88", TOO_OLD),
    ({"driver_version": None, "driver_cuda": (14, 0)}, "13.0.88", OK),
    # a forward-compatibility libcuda: the kernel module is 535, libcuda offers 13.0
    ({"driver_version": "535.104.05", "driver_cuda": (13, 0)}, "13.0.88", OK),
    ({"driver_version": "610.43.02", "driver_cuda": None}, "14", UNKNOWN),
    ({"driver_version": "610.43.02", "driver_cuda": None}, "13", OK),
    ({"driver_version": "525.60.13", "driver_cuda": None}, "12.8.93", OK),
    ({"driver_version": None, "driver_cuda": None, "problems": ("driver version unknown",)},
     "13", UNKNOWN),
])
def test_driver_against_the_kits_cuda(fields: dict[str, Any], kit: str, status: str) -> None:
    check = check_driver(report(**fields), kit)
    assert check.status == status
    if status == TOO_OLD:
        assert check.fix == ("install an NVIDIA driver of the 580 branch or newer "
                             "(580.65.06 shipped with CUDA 13.0 GA)")


def test_driver_575_against_cuda_13_in_words() -> None:
    check = check_driver(report(driver_version="575.57.08", driver_cuda=None,
                                driver_source="nvidia-smi"), "13.0.88")
    assert check.requirement == "An NVIDIA driver for CUDA 13 (driver ≥ 580 on Linux x86-64)"
    assert check.found == "575.57.08 (CUDA 12.9), from nvidia-smi"


def test_the_h200_and_the_example_kits() -> None:
    """On the H200 both example kits ran their 13 kernels through PTX JIT, and both failed with
    "PTX JIT compilation was disabled" under CUDA_DISABLE_PTX_JIT=1 (h200-example-kits.txt):
    `example` (separable compilation) from the relocatable PTX the CUDA runtime JIT-links,
    `example-jit` from the PTX in .nv_fatbin. verify must say so for both."""
    recorded = (RECORDED / "h200-example-kits.txt").read_text(encoding="utf-8")
    for kit in ("example", "example-jit"):
        assert f"{kit} cold-cache: rc=0" in recorded
        assert f"{kit} no-jit: rc=1" in recorded
    h200 = report()
    separable = check_gpu_side(h200, "13.0.88", ("sm_86",), (), ("sm_86", "compute_86"))
    assert separable.driver.status == OK
    assert separable.driver.found == "580.159.04 (CUDA 13.0), from /proc/driver/nvidia/version"
    assert separable.runs is True
    assert (separable.gpus[0].how, separable.gpus[0].code) == ("ptx-jit", "compute_86")
    assert separable.gpus[0].found == (
        "GPU 0 NVIDIA H200 (compute capability 9.0): runs through PTX JIT (no SASS for 9.0 (SASS "
        "sm_86 runs on 8.6 or a later 8.x); the CUDA runtime JIT-compiles and links the "
        "relocatable device code (PTX compute_86 in __nv_relfatbin) for it when the program "
        "starts, so the first start is slower; later starts reuse the driver's JIT cache)")
    assert separable.gpus[0].requirement == "An NVIDIA GPU of compute capability 8.6 or higher"
    whole = check_gpu_side(h200, "13.0.88", ("sm_86",), ("compute_86",))
    assert whole.runs is True
    assert (whole.gpus[0].how, whole.gpus[0].code) == ("ptx-jit", "compute_86")
    assert "the driver compiles PTX compute_86 for it" in whole.gpus[0].found
    sass_only = check_gpu_side(h200, "13.0.88", ("sm_86",), ())
    assert sass_only.runs is False
    assert sass_only.gpus[0].found == (
        "GPU 0 NVIDIA H200 (compute capability 9.0): cannot run: no SASS for 9.0 (SASS sm_86 "
        "runs on 8.6 or a later 8.x); no PTX, so the driver cannot JIT-compile kernels for it "
        "(the first kernel launch fails with \"no kernel image is available for execution on "
        "the device\")")


def _recorded_probe() -> dict[str, tuple[int, str]]:
    """h200-jit-probe.txt: program → (exit status, what it printed), with the JIT cache off."""
    outcomes = {}
    for line in (RECORDED / "h200-jit-probe.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, rest = line.partition(": ")
        first = rest.split(" | ")[0]
        said, _, status = first.rpartition(" rc=")
        outcomes[name] = (int(status), said.removeprefix("launch: "))
    return outcomes


@pytest.fixture(scope="module")
def jit_probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four programs of h200-jit-probe.txt, built here as they were for the H200."""
    folder = tmp_path_factory.mktemp("jit-probes")
    compiler = nvcc()
    rdc = [RECORDED / "jit_probe_main.cu", RECORDED / "jit_probe_helper.cu"]
    whole = [RECORDED / "jit_probe_whole.cu"]
    sass_only = ["-gencode", "arch=compute_86,code=sm_86"]
    builds = {"rdc_sass_ptx": ["-rdc=true", "-arch=sm_86", *rdc],
              "rdc_sass_only": ["-rdc=true", *sass_only, *rdc],
              "whole_sass_ptx": ["-arch=sm_86", *whole],
              "whole_sass_only": [*sass_only, *whole]}
    for name, arguments in builds.items():
        run(compiler, *arguments, "-o", folder / name, cwd=folder)
    return {name: folder / name for name in builds}


def test_verdicts_agree_with_the_h200(jit_probes: dict[str, Path]) -> None:
    """Each program's device code as the inspector reads it, judged for the H200, against what
    it did there: runs (through PTX JIT) exactly when it ran, and a program that failed is
    said to fail with the very error it printed."""
    recorded = _recorded_probe()
    assert sorted(recorded) == sorted(jit_probes)
    for name, path in jit_probes.items():
        code = read_elf(path).device_code
        sass = tuple(sorted({e.arch for e in code if e.loadable and e.kind == "sass"}))
        ptx = tuple(sorted({e.arch for e in code if e.loadable and e.kind == "ptx"}))
        relocatable = tuple(sorted({e.arch for e in code if not e.loadable}))
        check = check_gpu(H200, sass, ptx, relocatable, kit_cuda="13.0.88", driver_cuda=(13, 0))
        status, said = recorded[name]
        assert (check.status == OK) == (status == 0), (name, check)
        if status == 0:
            assert check.how == "ptx-jit", name
        else:
            assert f'fails with "{said}"' in check.found, (name, check.found)


@pytest.mark.parametrize(("sass", "ptx", "requirement"), [
    # the floor's wording (docs/floor.md's example kit row, and floor._arch_row)
    (("sm_86",), (), "An NVIDIA GPU of compute capability 8.6 or a later 8.x"),
    (("sm_86",), ("compute_86",), "An NVIDIA GPU of compute capability 8.6 or higher"),
    (("sm_120a",), (), "An NVIDIA GPU of compute capability 12.0 only"),
    ((), (), "An NVIDIA GPU of compute capability unknown"),
])
def test_requirement_is_worded_as_the_floor(sass: tuple[str, ...], ptx: tuple[str, ...],
                                            requirement: str) -> None:
    assert gpu_requirement(sass, ptx) == requirement


def test_requirement_counts_relocatable_ptx() -> None:
    assert gpu_requirement(("sm_86",), (), ("sm_86", "compute_86")) == (
        "An NVIDIA GPU of compute capability 8.6 or higher")
    assert gpu_requirement(("sm_86",), (), ("sm_86",)) == (
        "An NVIDIA GPU of compute capability 8.6 or a later 8.x")


def test_kit_cuda_versions() -> None:
    assert kit_cuda_version("13.0.88") == (13, 0)
    assert kit_cuda_version("13") == (13, None)
    assert kit_cuda_version(12) == (12, None)
    with pytest.raises(ValueError):
        kit_cuda_version("thirteen")


# --------------------------------------------------------------------------- cuda_drivers.toml


def test_shipped_driver_table() -> None:
    table = cuda_drivers()
    assert (table.major_floor(13), table.major_floor(12), table.major_floor(11)) == (
        "580", "525", "450.80.02")
    assert table.major_floor(10) is None
    for cuda, driver in (((13, 0), "580.65.06"), ((13, 1), "590.44.01"), ((13, 2), "595.45.04"),
                         ((12, 9), "575.51.03"), ((12, 0), "525.60.13")):
        first = table.first_of(cuda)
        assert first is not None and first.driver == driver, cuda
    assert table.cuda_of("580.159.04") == ((13, 0), False)
    assert table.cuda_of("575.57.08") == ((12, 9), False)
    assert table.cuda_of("590.48.01") == ((13, 1), False)
    assert table.cuda_of("600.10") == ((13, 2), True)  # newer than the table knows
    assert table.cuda_of("440.33") == (None, False)


def _raw(*releases: dict[str, str], **extra: Any) -> Table:
    raw = {"schema": 1, "majors": {"13": {"driver": "580"}, "12": {"driver": "525"}},
           "releases": list(releases) or [{"cuda": "13.0", "release": "GA",
                                           "driver": "580.65.06"}], **extra}
    return Table(Source(Path("cuda_drivers.toml"), Locator("")), (), raw)


@pytest.mark.parametrize(("raw", "message"), [
    (_raw(schema=2), "unsupported schema 2"),
    (_raw(majors={"x": {"driver": "580"}}), r"\[majors.x\] needs a numeric major"),
    (_raw(majors={"13": {"driver": "580.x"}}), r"\[majors.13\] needs a numeric major"),
    (_raw({"cuda": "13.0", "release": "GA", "driver": "580.65.06", "url": "x"}),
     "needs exactly cuda, release and driver"),
    (_raw({"cuda": "13", "release": "GA", "driver": "580.65.06"}), "cuda must be MAJOR.MINOR"),
    (_raw({"cuda": "13.0", "release": "Update one", "driver": "580.65.06"}),
     "release must be \"GA\" or \"Update N\""),
    (_raw({"cuda": "13.0", "release": "GA", "driver": ">=580.65.06"}), "driver must be"),
    (_raw({"cuda": "11.8", "release": "GA", "driver": "520.61.05"}), r"has no \[majors.11\]"),
    (_raw({"cuda": "13.0", "release": "GA", "driver": "575.57.08"}),
     "driver 575.57.08 is below CUDA 13's floor 580"),
    (_raw({"cuda": "13.0", "release": "GA", "driver": "580.65.06"},
          {"cuda": "13.1", "release": "GA", "driver": "590.44.01"}),
     "CUDA 13.1 GA must come after CUDA 13.0 GA"),
    (_raw({"cuda": "13.1", "release": "GA", "driver": "580.65.06"},
          {"cuda": "13.0", "release": "GA", "driver": "590.44.01"}),
     "CUDA 13.0 GA needs 590.44.01, more than the later CUDA 13.1 GA"),
    (_raw(releases=[]), "no \\[\\[releases\\]\\]"),
])
def test_driver_table_is_validated(raw: Table, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        drivers._validate(raw)


def test_a_data_file_error_names_the_line_also_in_an_array_of_tables(tmp_path: Path) -> None:
    """[[releases]] item N is the table releases.N, found at its line; a number too large for
    int() is invalid TOML at its line, as in the matrix, not a crash."""
    path = tmp_path / "cuda_drivers.toml"
    path.write_text('schema = 1\n[majors.13]\ndriver = "580"\n\n[[releases]]\ncuda = "13.1"\n'
                    'release = "GA"\ndriver = "590.44.01"\n\n[[releases]]\ncuda = "13"\n'
                    'release = "GA"\ndriver = "580.65.06"\n')
    with pytest.raises(ConfigError, match=r"cuda must be MAJOR\.MINOR") as caught:
        drivers._validate(read_data_file(path, "the CUDA driver facts file"))
    assert caught.value.where.table == "releases.2" and caught.value.where.line == 11
    path.write_text("schema = 1\nmajors = " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError, match="invalid TOML") as caught:
        read_data_file(path, "the CUDA driver facts file")
    assert str(path) in str(caught.value)  # before, a ValueError and a traceback


def test_recorded_files_are_what_the_host_printed() -> None:
    """The recorded inputs are kept byte for byte (trailing spaces included)."""
    assert H200_PROC.read_bytes().endswith(b"GCC version:  gcc version 15.3.0 (GCC) \n")
    assert os.path.getsize(H200_SMI) == len("580.159.04, 9.0, NVIDIA H200\n")


def test_the_h200_ran_the_glibc_231_kit_from_its_own_libraries() -> None:
    """`scripts/gpu-check.sh prepare-sysroot`, then `run` on the H200 host (Ubuntu 24.04) under
    `env -i` (h200-sysroot-kit.txt): the portable kit of example-glibc231 arrived as built (its
    tar stream's sha256), verify said it runs, its 13 kernels ran, and the loader took every
    library but glibc's from kit/lib."""
    recorded = (RECORDED / "h200-sysroot-kit.txt").read_text(encoding="utf-8")
    stream = re.search(r"tar stream sha256 ([0-9a-f]{64}), built: ([0-9a-f]{64})", recorded)
    assert stream is not None and stream[1] == stream[2]
    assert "| x86-64 Linux, glibc ≥ 2.29 " in recorded and "== sysroot: verify exit status 0" \
        in recorded
    assert "kernel smoke test: 13 kernels ok" in recorded
    assert "== sysroot: ninfer exit status 0" in recorded
    libraries = dict(re.findall(r"^\t(\S+) => (\S+) \(", recorded, re.MULTILINE))
    glibc = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}
    assert set(libraries) - glibc == {
        "libcudart.so.13", "libcurl.so.4", "libavformat.so.61", "libavcodec.so.61",
        "libavutil.so.59", "libswscale.so.8", "libswresample.so.5", "libssl.so.3",
        "libcrypto.so.3", "libz.so.1"}
    assert all("/kit/bin/../lib/" in path for name, path in libraries.items()
               if name not in glibc)
    assert "libcurl/8.14.1 OpenSSL/3.5.7 zlib/1.2.11" in recorded
