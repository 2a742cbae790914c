"""The example engine as the tests whose claim is not about its build use it: the same sources,
its CUDA kernels compiled as ONE translation unit.

nvcc's cost per .cu file is mostly fixed (the host compiler's passes over the CUDA and C++
headers, cicc, ptxas, fatbinary): the example's 14 kernel files cost about 14 times one file,
one file that includes them all about one and a half (a cold build of the kit on 2 cores: 20
compile calls, 8 of them). The kernels, the apps, the libraries they link and the build
interface are the example's own; only CMake's list of sources differs. Tests about the build
itself (its compile calls, the objects a kept tree carries over, what `inspect` shows of the
13 relocatable device objects) keep examples/engine as it is.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tools import ROOT, git

ENGINE = ROOT / "examples" / "engine"
ONE_UNIT = "src/kernels/all_kernels.cu"
_KERNEL_LINE = re.compile(r"^[ \t]+(src/kernels/[\w.-]+\.cu)[ \t]*\n", re.M)


def one_unit_engine(dest: Path) -> Path:
    """examples/engine copied to `dest` (which must not exist), its kernels built from one .cu
    that includes every kernel file; `dest`."""
    shutil.copytree(ENGINE, dest, ignore=shutil.ignore_patterns("build", "build-*"))
    kernels = sorted(path.name for path in (dest / "src" / "kernels").glob("*.cu"))
    cmake = dest / "CMakeLists.txt"
    text = cmake.read_text(encoding="utf-8")
    listed = _KERNEL_LINE.findall(text)
    # Every kernel file is in CMake's list, once: else the example changed in a way this
    # helper does not know, and says so rather than build something else.
    assert sorted(Path(name).name for name in listed) == kernels, (listed, kernels)
    first = _KERNEL_LINE.search(text)
    assert first is not None
    text = (text[:first.start()] + f"  {ONE_UNIT}\n"
            + _KERNEL_LINE.sub("", text[first.start():]))
    cmake.write_text(text, encoding="utf-8")
    (dest / ONE_UNIT).write_text(
        "// Every kernel of the example in one translation unit (tests/engine_fixtures.py).\n"
        + "".join(f'#include "{name}"\n' for name in kernels), encoding="utf-8")
    return dest


def one_unit_repo(dest: Path, message: str = "ninfer-example, kernels in one unit") -> str:
    """one_unit_engine(dest) as a fresh git repository with one commit; its SHA."""
    one_unit_engine(dest)
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", message, cwd=dest)
    return git("rev-parse", "HEAD", cwd=dest)


@pytest.fixture(scope="session")
def one_unit_example_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """example_repo's engine with its kernels in one translation unit (one_unit_engine), a
    git repository with one commit: for the builds whose test is not about compiling the
    example file by file, one nvcc call instead of fourteen."""
    repo = tmp_path_factory.mktemp("one-unit-repo") / "ninfer-example"
    return repo, one_unit_repo(repo, "ninfer-example")
