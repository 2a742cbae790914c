"""`ninfer-kits build`: the example engine, end to end, as a user runs it, and how it fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits import buildinfo
from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline import hostdeps
from ninfer_kits.pipeline.builders import required_cuda
from ninfer_kits.pipeline.pack import hash_file
from ninfer_kits.pipeline.stages import check_archs, check_search_paths

from tools import ROOT, changed_copy, missing, needs_libcurl_headers, nvcc, sha256_of, tool

TAG = "example-v0.3.0-linux-sm86"
ASSET = "ninfer-example-kit-v0.3.0-sm86.tar.gz"
COMMIT_TIME = 1735689600  # 2025-01-01T00:00:00Z, the example repository's commit date


@dataclass(frozen=True)
class Built:
    done: subprocess.CompletedProcess[str]
    dist: Path
    cache: Path

    @property
    def out(self) -> Path:
        return self.dist / TAG


def build(place: Path, *args: str, env: dict[str, str] | None = None) -> Built:
    dist, cache = place / "dist", place / "cache"
    place.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "ninfer_kits", "build", "--matrix", str(ROOT / "matrix.toml"),
               "--dist", str(dist), "--cache-dir", str(cache), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})}, cwd=place.parent)
    return Built(done=done, dist=dist, cache=cache)


@pytest.fixture(scope="module")
def two_builds(example_repo: tuple[Path, str],
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Built, Built]:
    """The example kit built twice from empty caches, in different folders, -j1 and -j2."""
    tool("ninja")
    needs_libcurl_headers()
    repo, _ = example_repo
    first = build(tmp_path_factory.mktemp("first") / "a", "example", "--source", str(repo),
                  "--jobs", "1")
    second = build(tmp_path_factory.mktemp("second-place") / "deeper" / "b", "example",
                   "--source", str(repo), "--jobs", "2")
    for built in (first, second):
        assert built.done.returncode == 0, built.done.stderr[-4000:]
    return first, second


def test_output_folder_holds_the_finished_kit(two_builds: tuple[Built, Built]) -> None:
    first, _ = two_builds
    assert sorted(p.name for p in first.dist.iterdir()) == [TAG]
    assert sorted(p.name for p in first.out.iterdir()) == [
        "BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", "build.log", ASSET]
    assert "[1/" in (first.out / "build.log").read_text()


def test_tarballs_are_byte_identical(two_builds: tuple[Built, Built]) -> None:
    first, second = two_builds
    assert sha256_of(first.out / ASSET) == sha256_of(second.out / ASSET)


def test_buildinfo_differs_only_in_the_run_section(two_builds: tuple[Built, Built]) -> None:
    first, second = two_builds
    texts = [(built.out / "BUILDINFO.txt").read_text() for built in two_builds]
    above = [text.split(buildinfo.RUN_MARKER)[0] for text in texts]
    assert above[0] == above[1]
    infos = [buildinfo.read(built.out / "BUILDINFO.txt") for built in two_builds]
    assert (infos[0].run_value("jobs"), infos[1].run_value("jobs")) == ("1", "2")
    sums = [(built.out / "SHA256SUMS").read_text().splitlines() for built in (first, second)]
    tarball_lines = [[line for line in lines if ASSET in line] for lines in sums]
    assert tarball_lines[0] == tarball_lines[1]


def test_no_build_folder_in_the_kit(two_builds: tuple[Built, Built]) -> None:
    """Neither the cache (where the source and build trees live) nor the folder the build ran
    from appear in a shipped binary, device code (-lineinfo) included."""
    for built in two_builds:
        with tarfile.open(built.out / ASSET) as archive:
            for member in archive.getmembers():
                if member.name.startswith("kit/bin/"):
                    data = archive.extractfile(member).read()  # type: ignore[union-attr]
                    assert str(built.cache).encode() not in data, member.name
                    assert str(built.dist.parent).encode() not in data, member.name


def test_sha256sums_verify_with_coreutils(two_builds: tuple[Built, Built]) -> None:
    out = two_builds[0].out
    done = subprocess.run([tool("sha256sum"), "-c", "SHA256SUMS"], cwd=out, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (out / "SHA256SUMS").read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == sorted(["BUILDINFO.txt", ASSET])


def test_sha1_of_the_tarball_is_recorded(two_builds: tuple[Built, Built]) -> None:
    out = two_builds[0].out
    assert (out / "SHA1SUMS").read_text() == f"{hash_file(out / ASSET).sha1}  {ASSET}\n"
    done = subprocess.run([tool("sha1sum"), "-c", "SHA1SUMS"], cwd=out, check=False)
    assert done.returncode == 0


def test_listing_is_normalized(two_builds: tuple[Built, Built]) -> None:
    listing = subprocess.run([tool("tar"), "--numeric-owner", "-tzvf",
                              str(two_builds[0].out / ASSET)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    names = [line.split()[-1] for line in listing]
    assert names == sorted(names)
    assert {"kit/", "kit/bin/ninfer", "kit/bin/ninfer-serve", "kit/BUILDINFO.txt",
            "kit/LICENSE", "kit/NOTICE", "kit/third_party/tinyjson/LICENSE"} <= set(names)
    for line in listing:
        mode, owner, _size, day, clock, name = line.split()
        assert owner == "0/0" and (day, clock) == ("2025-01-01", "00:00"), line
        executable = name.startswith("kit/bin/") or name.endswith("/")
        assert mode[1:] == ("rwxr-xr-x" if executable else "rw-r--r--"), line
    with tarfile.open(two_builds[0].out / ASSET) as archive:
        assert all(m.uname == "" and m.gname == "" and m.mtime == COMMIT_TIME
                   for m in archive.getmembers())


def test_gnu_tar_unpacks_and_the_binaries_run(two_builds: tuple[Built, Built],
                                              tmp_path: Path) -> None:
    out = two_builds[0].out
    subprocess.run([tool("tar"), "xzf", str(out / ASSET), "-C", str(tmp_path)], check=True)
    version = subprocess.run([str(tmp_path / "kit/bin/ninfer"), "--version"],
                             capture_output=True, text=True, check=True).stdout
    assert version.startswith("ninfer 0.3.0-example")
    info = buildinfo.read(out / "BUILDINFO.txt")
    for digest, name in info.binaries:
        assert hash_file(tmp_path / name).sha256 == digest
    inside = buildinfo.read(tmp_path / "kit/BUILDINFO.txt")
    assert inside.run == () and inside.revision == info.revision


def test_buildinfo_records_the_build(two_builds: tuple[Built, Built],
                                     example_repo: tuple[Path, str]) -> None:
    info = buildinfo.read(two_builds[0].out / "BUILDINFO.txt")
    _, commit = example_repo
    assert (info.kit, info.arch, info.revision, info.version) == (
        "example", "sm_86", commit, "0.3.0-example")
    assert info.source_date_epoch == COMMIT_TIME
    assert info.cuda_version.startswith("13.")
    assert info.host_compiler.startswith("GNU ")
    assert "-DCMAKE_CUDA_ARCHITECTURES=86" in info.cmake_options
    assert info.sass == "sm_86" and "libcudart.so.13" in info.sonames
    assert info.licenses == ("kit/LICENSE", "kit/NOTICE", "kit/third_party/tinyjson/LICENSE")
    assert float(info.run_value("compile_seconds") or "nan") > 0
    assert buildinfo.parse(buildinfo.render(info)) == info


def test_the_summary_names_the_kit_and_its_floor(two_builds: tuple[Built, Built]) -> None:
    first, _ = two_builds
    stdout = first.done.stdout
    tarball = first.out / ASSET
    assert f"kit      {tarball}" in stdout
    assert f"sha256   {hash_file(tarball).sha256}" in stdout
    assert re.search(r"size     [\d,]+ bytes", stdout)
    assert "| CUDA 13 runtime — libcudart.so.13" in stdout


def test_unknown_kit_suggests_a_name(tmp_path: Path) -> None:
    built = build(tmp_path / "x", "exampel")
    assert built.done.returncode == 2
    assert "did you mean 'example'" in built.done.stderr
    assert "Traceback" not in built.done.stderr


def test_missing_revision_is_bad_input(example_repo: tuple[Path, str], tmp_path: Path) -> None:
    built = build(tmp_path / "x", "example", "--source", str(example_repo[0]),
                  "--revision", "deadbeef")
    assert built.done.returncode == 2
    assert "deadbeef" in built.done.stderr and "not found" in built.done.stderr
    assert not built.dist.exists() or not any(built.dist.iterdir())


def test_named_compiler_that_is_missing(tmp_path: Path) -> None:
    built = build(tmp_path / "x", "example", env={"NVCC": "/nonexistent/nvcc"})
    assert built.done.returncode == 2
    assert "/nonexistent/nvcc" in built.done.stderr and "CUDA toolkit" in built.done.stderr


def local_cuda() -> tuple[int, ...]:
    """The CUDA version of the nvcc the local builder uses (NVCC, /usr/local/cuda, PATH)."""
    output = subprocess.run([nvcc(), "--version"], capture_output=True, text=True,
                            check=False).stdout
    found = re.search(r"release \S+ V(\d+(?:\.\d+)+)", output)
    assert found, output
    return tuple(int(part) for part in found.group(1).split("."))


def test_production_kit_fails_early_on_old_local_cuda(tmp_path: Path) -> None:
    kit = load_matrix(ROOT / "matrix.toml").kit("ninfer-sm120a")
    needed = required_cuda(kit)
    if hostdeps.check().missing:
        missing("the build dependencies (python -m ninfer_kits.pipeline.hostdeps names them)")
    if local_cuda() >= needed.parts:  # new enough here: the check passes and the build goes
        built = build(tmp_path / "x", "ninfer-sm120a",  # on, to a source that is not there
                      "--source", str(tmp_path / "no-such-checkout"))
        assert "needs CUDA" not in built.done.stderr
        assert built.done.returncode == 2, built.done.stderr
        return
    built = build(tmp_path / "x", "ninfer-sm120a")
    assert built.done.returncode == 2
    assert f"needs CUDA ≥ {needed}" in built.done.stderr
    assert "--builder docker" in built.done.stderr
    assert not (built.cache / "git").exists(), "nothing may be fetched before the check"


def test_compile_failure_shows_the_log_tail(example_repo: tuple[Path, str],
                                            tmp_path: Path) -> None:
    broken = changed_copy(example_repo[0], tmp_path / "broken-repo", "src/kernels/rmsnorm.cu",
                          "\nthis is not CUDA;\n")
    built = build(tmp_path / "x", "example", "--source", str(broken),
                  env={"GITHUB_ACTIONS": "true"})
    assert built.done.returncode == 1
    stderr = built.done.stderr
    assert "::group::compile" in stderr and "::error::compiling example failed" in stderr
    assert "compiling example failed" in stderr and "rmsnorm.cu" in stderr
    log = Path(re.findall(r"full log: (\S+)", stderr)[0])
    assert log.is_file() and "this is not CUDA" in log.read_text()
    assert stderr.count("  | ") <= 30
    assert not built.dist.exists() or not any(built.dist.iterdir())


def test_disk_full_while_packing_leaves_nothing(example_repo: tuple[Path, str],
                                               tmp_path: Path) -> None:
    dist = tmp_path / "x" / "dist"
    dist.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(dist)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        missing(f"a small tmpfs to fill (mount failed: {mounted.stderr.strip()})")
    try:
        built = build(tmp_path / "x", "example", "--source", str(example_repo[0]))
        assert built.done.returncode == 1, built.done.stderr[-2000:]
        assert "no space left on device" in built.done.stderr.lower()
        assert "Traceback" not in built.done.stderr
        assert list(dist.iterdir()) == []
    finally:
        subprocess.run(["umount", str(dist)], check=False)


def test_arch_check_refuses_missing_and_undeclared_archs(
    cuda_binaries: dict[str, Path], c_binaries: dict[str, Path], tmp_path: Path
) -> None:
    kit = load_matrix(ROOT / "matrix.toml").kit("example")  # declares sm_86
    (tmp_path / "many").mkdir()
    shutil.copy(cuda_binaries["plain"], tmp_path / "many" / "ninfer")  # sm_86 + sm_100f + …
    with pytest.raises(CheckFailed, match="carries compute_90, sm_100f, sm_120a, which kit "
                                          "example does not declare"):
        check_archs(kit, inspect_path(tmp_path / "many"))
    (tmp_path / "none").mkdir()
    shutil.copy(c_binaries["glibc234"], tmp_path / "none" / "ninfer-serve")
    with pytest.raises(CheckFailed, match="carries no SASS for sm_86"):
        check_archs(kit, inspect_path(tmp_path / "none"))
    (tmp_path / "right").mkdir()
    shutil.copy(cuda_binaries["shared_cudart"], tmp_path / "right" / "ninfer")  # sm_86 only
    check_archs(kit, inspect_path(tmp_path / "right"))


def test_search_path_check_refuses_the_current_directory(c_binaries: dict[str, Path],
                                                          tmp_path: Path) -> None:
    shutil.copy(c_binaries["empty_runpath"], tmp_path / "ninfer")
    with pytest.raises(CheckFailed, match=r"RUNPATH '/opt/kitdemo/lib:' has ''"):
        check_search_paths(inspect_path(tmp_path))
    shutil.copy(c_binaries["runpath"], tmp_path / "ninfer")  # $ORIGIN/../lib is fine
    check_search_paths(inspect_path(tmp_path))


def test_buildinfo_parser_names_the_bad_line() -> None:
    with pytest.raises(BadInput, match=r"BUILDINFO.txt:3: expected 'key: value'"):
        buildinfo.parse("# comment\nformat: 1\nno separator here\n")
    with pytest.raises(BadInput, match="missing keys"):
        buildinfo.parse("format: 1\n")
