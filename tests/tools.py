"""Where the tests find real tools, and how they say so when one is missing.

Locally a missing tool skips the tests that need it, naming the tool; under CI (CI=1) it fails
instead, because CI installs everything and a silent skip would hide a broken setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
IN_CI = bool(os.environ.get("CI"))


def missing(what: str) -> None:
    message = f"{what} is not available here"
    if IN_CI:
        pytest.fail(f"{message}, and CI must run these tests", pytrace=False)
    pytest.skip(message)


def nvcc() -> Path:
    candidates = [os.environ.get("NVCC", ""), "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    missing("nvcc (the CUDA compiler; set NVCC or install it at /usr/local/cuda)")
    raise AssertionError  # unreachable: missing() raises


def cuobjdump() -> Path:
    try:
        import nvidia

        for base in nvidia.__path__:
            found = sorted(Path(base).glob("cu*/bin/cuobjdump"))
            if found:
                return found[-1]
    except ImportError:
        pass
    which = shutil.which("cuobjdump")
    if which:
        return Path(which)
    missing("cuobjdump (pip install nvidia-cuda-cuobjdump)")
    raise AssertionError


def tool(name: str) -> str:
    """A tool from this environment's bin/ (CMake from the test extra), else from PATH."""
    path = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}"
                                  f"{os.environ.get('PATH', '')}")
    if path is None:
        missing(name)
        raise AssertionError
    return path


def run(*command: str | Path, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{command} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


GIT_ENV = {
    "GIT_AUTHOR_NAME": "ninfer-kits tests",
    "GIT_AUTHOR_EMAIL": "tests@ninfer-kits.invalid",
    "GIT_COMMITTER_NAME": "ninfer-kits tests",
    "GIT_COMMITTER_EMAIL": "tests@ninfer-kits.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


def git(*args: str, cwd: Path, date: str | None = None) -> str:
    """git with a fixed identity and time (`date`, ISO 8601, instead of GIT_ENV's)."""
    dates = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    env = {**os.environ, **GIT_ENV, **dates, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        [tool("git"), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout.strip()


def needs_libcurl_headers() -> None:
    if not any(
        Path(p).is_file()
        for p in ("/usr/include/curl/curl.h", "/usr/include/x86_64-linux-gnu/curl/curl.h")
    ):
        missing("libcurl's headers (apt-get install libcurl4-openssl-dev)")


def sha256_of(path: Path) -> str:
    """Compare files by this, not by their bytes: a failing assert then shows two short lines
    (pytest's diff of two large byte strings runs for many minutes)."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def changed_copy(repo: Path, dest: Path, file: str, appended: str,
                 date: str | None = None) -> Path:
    """A copy of a git repository with one more commit (at `date`, else GIT_ENV's time) that
    appends text to one file."""
    shutil.copytree(repo, dest)
    target = dest / file
    target.write_text(target.read_text() + appended)
    git("commit", "-q", "-am", f"change {file}", cwd=dest, date=date)
    return dest


# A valid toolchain table for the small matrices tests write (one place to keep it current).
# The Dockerfiles must exist: these are ones ninfer-kits ships, found from a matrix anywhere.
TOOLCHAIN_TC = """\
[toolchains.tc]
dockerfile = "dockerfiles/toolchain-cuda-ubuntu.Dockerfile"
base_image = "nvidia/cuda:13.1.2-devel-ubuntu24.04"
cuda = "13.1.2"
runtime_dockerfile = "dockerfiles/runtime-ubuntu.Dockerfile"
runtime_base_image = "nvidia/cuda:13.1.2-runtime-ubuntu24.04"
"""
