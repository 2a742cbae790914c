"""scripts/install-cuda-wheels.sh, which puts nvcc at /usr/local/cuda on a CI runner (.ci/run on
ubuntu-latest): its wheel set is the test toolchain image's own pin list."""

from __future__ import annotations

import re
import subprocess

import pytest

from tools import ROOT

SCRIPT = ROOT / "scripts" / "install-cuda-wheels.sh"
PINS = ROOT / "dockerfiles" / "context" / "cuda-wheels"
DOCKERFILE = ROOT / "dockerfiles" / "toolchain-wheels-debian.Dockerfile"


def _dockerfile_pins(version: str) -> list[str]:
    assert "COPY context/cuda-wheels/" in DOCKERFILE.read_text(encoding="utf-8")
    text = (PINS / f"{version}.txt").read_text(encoding="utf-8")
    return re.findall(r"(?m)^([A-Za-z0-9_.-]+==\S+ --hash=sha256:[0-9a-f]{64})$", text)


@pytest.mark.parametrize("version", ["13.0", "13.1"])
def test_the_host_toolkit_installs_the_images_pinned_wheels(version: str) -> None:
    done = subprocess.run(["bash", str(SCRIPT), version, "--requirements"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    pins = _dockerfile_pins(version)
    assert len(pins) == 10 and any(pin.startswith("nvidia-cuda-nvcc==") for pin in pins)
    assert done.stdout.splitlines() == pins


def test_an_unknown_version_is_refused() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "12.9", "--requirements"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 2 and "unknown argument: 12.9" in done.stderr
    assert done.stdout == ""
