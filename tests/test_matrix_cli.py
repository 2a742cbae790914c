"""`ninfer-kits matrix`, run as a user runs it: a subprocess with the real matrix.toml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ROOT / "matrix.toml"
KITS = ("ninfer-sm120a", "ninfer-3090-sm86", "ninfer-all-sm86", "ninfer-all-sm89",
        "ninfer-all-sm120a", "example", "example-sm120a", "example-glibc228",
        "example-jit")


def run_matrix(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "NINFER_KITS_MATRIX"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "matrix", *args],
        cwd=cwd, env=environment, capture_output=True, text=True, check=False,
    )


def test_table_lists_every_kit_from_the_current_directory() -> None:
    run = run_matrix()
    assert (run.returncode, run.stderr) == (0, "")
    header, *rows = run.stdout.splitlines()
    assert header.split() == ["KIT", "UPSTREAM", "BRANCH", "REVISION", "ARCH", "CARD",
                              "TOOLCHAIN", "TAG", "ASSET"]
    assert [row.split()[0] for row in rows] == list(KITS)
    by_kit = {row.split()[0]: row for row in rows}
    assert "v0.6.1-rtx3090-linux-sm86" in by_kit["ninfer-3090-sm86"]
    assert "ninfer-3090-kit-v0.6.1-sm86.tar.gz" in by_kit["ninfer-3090-sm86"]
    assert "rtx5090-linux-sm120a-feaf4dd0" in by_kit["ninfer-sm120a"]
    assert "branch head" in by_kit["ninfer-all-sm89"]
    assert "ninfer-all-kit-{rev12}-sm89.tar.gz" in by_kit["ninfer-all-sm89"]
    # Aligned: every column starts at the same offset in every row.
    start = header.index("ASSET")
    assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows)


def test_json_has_every_field() -> None:
    run = run_matrix("--json", "--matrix", str(PRODUCTION))
    assert run.returncode == 0
    document = json.loads(run.stdout)
    assert document["schema_version"] == 1
    assert document["matrix"] == str(PRODUCTION)
    assert document["registry"] == {"prefix": "ghcr.io/ninfer-kits", "host": "ghcr.io"}
    kits = {kit["kit"]: kit for kit in document["kits"]}
    assert list(kits) == list(KITS)
    kit = kits["ninfer-3090-sm86"]
    assert kit["tag"] == "v0.6.1-rtx3090-linux-sm86"
    assert kit["asset"] == "ninfer-3090-kit-v0.6.1-sm86.tar.gz"
    assert kit["pending"] == []
    assert kit["upstream"]["revision"] == "403fc56d"
    assert kit["upstream"]["version"] == "0.6.1-rtx3090"
    assert kit["upstream"]["cmake_options"] == [["CMAKE_BUILD_TYPE", "Release"]]
    assert kit["toolchain"] == {
        "id": "bullseye-sysroot-cuda130", "cuda": "13.0.88",
        "dockerfile": "dockerfiles/toolchain-sysroot-debian.Dockerfile",
        "dockerfile_path": str(ROOT / "dockerfiles/toolchain-sysroot-debian.Dockerfile"),
        "base_image": "ninfer-kits/debian-trixie-base:local",
        "build_args": {"CUDA_WHEELS": "13.0"},
        "runtime_dockerfile": "dockerfiles/runtime-wheels-debian.Dockerfile",
        "runtime_dockerfile_path": str(ROOT / "dockerfiles/runtime-wheels-debian.Dockerfile"),
        "runtime_base_image": "ninfer-kits/debian-trixie-minbase:local",
        "runtime_build_args": {"CUDA_WHEELS": "13.0"},
        "runtime_packages": ["libavformat61", "libavcodec61", "libavutil59", "libswscale8"],
        "image": "", "runtime_image": "", "pinned": False, "registries": [],
    }
    cuda131 = kits["example-sm120a"]["toolchain"]
    assert (cuda131["id"], cuda131["cuda"]) == ("bullseye-sysroot-cuda131", "13.1.115")
    assert cuda131["build_args"] == cuda131["runtime_build_args"] == {"CUDA_WHEELS": "13.1"}
    assert cuda131["runtime_packages"] == ["libavformat61", "libavcodec61", "libavutil59",
                                           "libswscale8"]
    assert kits["example"]["toolchain"]["build_args"] == {"CUDA_WHEELS": "13.0"}
    assert kits["example-sm120a"]["tag"] == "example-v{version_core}-linux-sm120a"
    assert kits["ninfer-all-sm86"]["pending"] == ["version", "rev8", "rev12"]
    assert kits["example"]["upstream"]["source"] == str(ROOT / "examples" / "engine")
    # Stable: sorted keys, two-space indent, the same bytes on a second run.
    assert run.stdout == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert run_matrix("--json", "--matrix", str(PRODUCTION)).stdout == run.stdout


def test_github_is_one_line_for_a_job_matrix() -> None:
    run = run_matrix("--github", env={"NINFER_KITS_MATRIX": str(PRODUCTION)}, cwd=Path("/"))
    assert run.returncode == 0
    assert run.stdout.count("\n") == 1
    include = json.loads(run.stdout)["include"]
    assert len(include) == len(KITS) == 9
    assert include[1] == {"kit": "ninfer-3090-sm86", "upstream": "ninfer-3090", "arch": "sm_86",
                          "toolchain": "bullseye-sysroot-cuda130", "card": "RTX 3090"}


def test_filter_by_kit() -> None:
    run = run_matrix("--github", "example", "ninfer-sm120a")
    assert run.returncode == 0
    assert [entry["kit"] for entry in json.loads(run.stdout)["include"]] == [
        "example", "ninfer-sm120a"]
    table = run_matrix("ninfer-all-sm89")
    assert [row.split()[0] for row in table.stdout.splitlines()] == ["KIT", "ninfer-all-sm89"]


def test_unknown_kit_suggests_and_exits_2() -> None:
    run = run_matrix("ninfer-all-sm98")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        "ninfer-kits: error: unknown kit 'ninfer-all-sm98'; did you mean 'ninfer-all-sm89'?\n"
    )


@pytest.mark.parametrize(
    ("old", "new", "line_text", "expected"),
    [
        ('[kits.example]\nupstream = "example"\narch = "sm_86"',
         '[kits.example]\nupstream = "example"\narch = "sm86"', 'arch = "sm86"',
         "[kits.example] key 'arch': invalid arch 'sm86'"),
        ("schema = 1", "schema = 1\nschema = 2", "schema = 2",
         "invalid TOML: Cannot overwrite a value"),
        ('runtime_dockerfile = "dockerfiles/runtime-ubuntu.Dockerfile"',
         'runtime_dockerfile = "dockerfiles/runtime-ubunt.Dockerfile"', "runtime-ubunt",
         "[toolchains.ubuntu2404-cuda131] key 'runtime_dockerfile': Dockerfile "
         "'dockerfiles/runtime-ubunt.Dockerfile' not found: looked for "),
        ('\nbuild_args = { CUDA_WHEELS = "13.1" }', '\nbuild_args = { BASE_IMAGE = "debian" }',
         "BASE_IMAGE", "[toolchains.bullseye-sysroot-cuda131.build_args] key 'BASE_IMAGE': "
         "BASE_IMAGE is set from 'base_image'; remove it here"),
    ],
)
def test_bad_matrix_is_one_line_and_exit_2(tmp_path: Path, old: str, new: str, line_text: str,
                                           expected: str) -> None:
    text = PRODUCTION.read_text(encoding="utf-8")
    assert text.count(old) == 1
    text = text.replace(old, new)
    line = text[: text.index(line_text)].count("\n") + 1
    path = tmp_path / "matrix.toml"
    path.write_text(text, encoding="utf-8")
    run = run_matrix("--matrix", str(path))
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith(f"ninfer-kits: error: {path}:{line}: {expected}")
    assert run.stderr.count("\n") == 1
    assert "Traceback" not in run.stderr


def test_missing_matrix_exits_2(tmp_path: Path) -> None:
    run = run_matrix(cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == ("ninfer-kits: error: matrix file not found: matrix.toml "
                          "(give --matrix PATH or set NINFER_KITS_MATRIX)\n")


def test_a_matrix_elsewhere_uses_the_shipped_dockerfiles(tmp_path: Path) -> None:
    """The production matrix copied to a folder without dockerfiles/: the standard images are
    the ones ninfer-kits ships (here, this checkout's)."""
    path = tmp_path / "matrix.toml"
    path.write_text(PRODUCTION.read_text(encoding="utf-8"), encoding="utf-8")
    shutil.copy(ROOT / "allowed_signers", tmp_path / "allowed_signers")  # [publish.signing]'s
    run = run_matrix("--json", "--matrix", str(path), "example-sm120a", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "")
    toolchain = json.loads(run.stdout)["kits"][0]["toolchain"]
    assert toolchain["dockerfile_path"] == str(
        ROOT / "dockerfiles/toolchain-sysroot-debian.Dockerfile")
    assert toolchain["runtime_dockerfile_path"] == str(
        ROOT / "dockerfiles/runtime-wheels-debian.Dockerfile")
    assert toolchain["runtime_build_args"] == {"CUDA_WHEELS": "13.1"}


def test_json_names_the_pins_and_the_registries_a_build_pulls_from(tmp_path: Path) -> None:
    """What rebuild.yml reads to log the engine in: a toolchain pinned by digest names its
    images' registries; one pinned in part names its pinned image's registry and that of the
    pinned base its other image is built from."""
    digest = "sha256:" + "ab" * 32
    image = (f"127.0.0.1:5000/kits/ninfer-kits-toolchain-bullseye-sysroot-cuda130:"
             f"0123456789abcdef@{digest}")
    runtime = f"ghcr.io/kits/ninfer-kits-runtime-bullseye-sysroot-cuda130@{digest}"
    base = f"debian:trixie-slim@{digest}"
    head, cuda131, tail = PRODUCTION.read_text(encoding="utf-8").partition(
        "[toolchains.bullseye-sysroot-cuda131]\n")
    head = head.replace("[toolchains.bullseye-sysroot-cuda130]\n",
                        f'[toolchains.bullseye-sysroot-cuda130]\nimage = "{image}"\n'
                        f'runtime_image = "{runtime}"\n')
    tail = tail.replace('runtime_base_image = "ninfer-kits/debian-trixie-minbase:local"',
                        f'runtime_base_image = "{base}"\nimage = "{image}"', 1)
    path = tmp_path / "matrix.toml"
    tail = tail.replace('prefix = "ghcr.io/ninfer-kits"', 'prefix = "127.0.0.1:5000/kits/"')
    path.write_text(head + cuda131 + tail, encoding="utf-8")
    shutil.copy(ROOT / "allowed_signers", tmp_path / "allowed_signers")
    run = run_matrix("--json", "--matrix", str(path), "ninfer-3090-sm86", "example-sm120a",
                     cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "")
    document = json.loads(run.stdout)
    assert document["registry"] == {"prefix": "127.0.0.1:5000/kits", "host": "127.0.0.1:5000"}
    pinned, part = (kit["toolchain"] for kit in document["kits"])
    assert (pinned["image"], pinned["runtime_image"], pinned["pinned"]) == (image, runtime, True)
    assert pinned["registries"] == ["127.0.0.1:5000", "ghcr.io"]
    assert (part["image"], part["runtime_image"], part["pinned"]) == (image, "", False)
    assert part["registries"] == ["127.0.0.1:5000", "docker.io"]
