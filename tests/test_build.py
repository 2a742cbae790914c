"""`ninfer-kits build`: the example engine, end to end, as a user runs it, and how it fails."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits.commands.build_cmd import BUILD_ROOM
from ninfer_kits.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_CODES,
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    BadInput,
    CheckFailed,
    EnvironmentFailure,
    exit_code_for,
    exit_codes_help,
)
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.kit.kitdir import KitDirInvalid, TagTaken
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import RevisionFacts, load_matrix
from ninfer_kits.pipeline import hostdeps
from ninfer_kits.pipeline.builders import (
    BUILDERS,
    BuilderOptions,
    LocalBuilder,
    make_builder,
    required_cuda,
)
from ninfer_kits.pipeline.buildinfo_keys import driver_and_gpu, pipeline_checkout
from ninfer_kits.pipeline.kit_rules import check_archs, check_glibc_floor, check_search_paths
from ninfer_kits.pipeline.pack import compressor
from source_archive import archive_for

from tools import ROOT, changed_copy, git, missing, needs_libcurl_headers, nvcc, sha256_of, tool

pytestmark = pytest.mark.slow

TAG = "example-v0.3.0-linux-sm86"
ASSET = "ninfer-example-kit-v0.3.0-sm86.tar.gz"
PORTABLE = "ninfer-example-kit-v0.3.0-sm86-portable.tar.gz"  # `portable = true` in matrix.toml
COMMIT_TIME = 1735689600  # 2025-01-01T00:00:00Z, the example repository's commit date


@dataclass(frozen=True)
class Built:
    done: subprocess.CompletedProcess[str]
    dist: Path
    cache: Path

    @property
    def out(self) -> Path:
        return self.dist / TAG


def build_command(place: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ninfer_kits", "build", "--matrix", str(ROOT / "matrix.toml"),
            "--dist", str(place / "dist"), "--cache-dir", str(place / "cache"), *args]


def build(place: Path, *args: str, env: dict[str, str] | None = None) -> Built:
    place.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(build_command(place, *args), capture_output=True, text=True,
                          check=False, env={**os.environ, **(env or {})}, cwd=place.parent)
    return Built(done=done, dist=place / "dist", cache=place / "cache")


@pytest.fixture(scope="module")
def two_builds(local_example_builds: dict[str, tuple[subprocess.CompletedProcess[str], Path]],
               ) -> tuple[Built, Built]:
    """The example kit built twice from empty caches, in different folders, -j1 and -j2 (the
    second is the session's example_build, two folders deeper): conftest's
    local_example_builds, which runs the two at once."""
    (first_done, first_place), (done, place) = (local_example_builds["-j1"],
                                                local_example_builds["-j2"])
    first = Built(done=first_done, dist=first_place / "dist", cache=first_place / "cache")
    second = Built(done=done, dist=place / "dist", cache=place / "cache")
    for built in (first, second):
        assert built.done.returncode == 0, built.done.stderr[-4000:]
    return first, second


def test_output_folder_holds_the_finished_kit(two_builds: tuple[Built, Built]) -> None:
    first, _ = two_builds
    assert sorted(p.name for p in first.dist.iterdir()) == [TAG]
    assert sorted(p.name for p in first.out.iterdir()) == sorted(
        ("BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", "build.log", PORTABLE, ASSET,
         *kitdir.attestation_names((ASSET, PORTABLE)), kitdir.OWED))
    assert "[1/" in (first.out / "build.log").read_text()
    # the portable kit's bundled FFmpeg owes its source: recorded, not fetched (publish does)
    said = first.done.stdout + first.done.stderr
    assert "Debian source packages owed, recorded in SOURCES.json; publish fetches them" in said


def test_tarballs_are_byte_identical(two_builds: tuple[Built, Built]) -> None:
    """Both flavours: the repaired kit too (the same libraries, the same patchelf edits)."""
    first, second = two_builds
    assert sha256_of(first.out / ASSET) == sha256_of(second.out / ASSET)
    assert sha256_of(first.out / PORTABLE) == sha256_of(second.out / PORTABLE)
    # their SBOM and provenance too: made from the inputs alone (-j and the folder are not)
    for name in kitdir.attestation_names((ASSET, PORTABLE)):
        assert (first.out / name).read_bytes() == (second.out / name).read_bytes(), name


def test_a_warm_compiler_cache_gives_the_same_kit(two_builds: tuple[Built, Built],
                                                  example_repo: tuple[Path, str],
                                                  tmp_path: Path) -> None:
    """The local builder compiles through ccache: the -j2 build filled its cache cold (every
    call a miss), a build in another folder given that cache (--ccache-dir) hits every call,
    and its kit is byte for byte the cold builds' (the -j1 one compiled without a cache)."""
    no_cache, cold = two_builds
    cache = cold.cache / "ccache"
    warm = build(tmp_path / "elsewhere" / "w", "example", "--source", str(example_repo[0]),
                 "--jobs", "2", "--ccache-dir", str(cache))
    assert warm.done.returncode == 0, warm.done.stderr[-4000:]
    infos = {name: buildinfo.read(built.out / "BUILDINFO.txt")
             for name, built in (("none", no_cache), ("cold", cold), ("warm", warm))}
    assert infos["none"].run_value("ccache") == "none (--no-ccache)"
    assert infos["none"].run_value("ccache_calls") is None
    assert infos["cold"].run_value("ccache") == str(cache.absolute())
    assert infos["warm"].run_value("ccache") == str(cache.absolute())
    calls = int(infos["cold"].run_value("ccache_calls") or 0)
    assert calls >= 10 and infos["cold"].run_value("ccache_hits") == "0", infos["cold"].run
    assert infos["warm"].run_value("ccache_calls") == str(calls), infos["warm"].run
    assert infos["warm"].run_value("ccache_hits") == str(calls), infos["warm"].run
    assert infos["warm"].run_value("ccache_misses") == "0", infos["warm"].run
    for name in (ASSET, PORTABLE):
        assert sha256_of(warm.out / name) == sha256_of(cold.out / name) \
            == sha256_of(no_cache.out / name), name


def test_buildinfo_differs_only_in_the_run_section(two_builds: tuple[Built, Built]) -> None:
    first, second = two_builds
    texts = [(built.out / "BUILDINFO.txt").read_text() for built in two_builds]
    above = [text.split(buildinfo.RUN_MARKER)[0] for text in texts]
    assert above[0] == above[1]
    infos = [buildinfo.read(built.out / "BUILDINFO.txt") for built in two_builds]
    assert (infos[0].run_value("jobs"), infos[1].run_value("jobs")) == ("1", "2")
    sums = [(built.out / "SHA256SUMS").read_text().splitlines() for built in (first, second)]
    tarball_lines = [[line for line in lines if ".tar.gz" in line] for lines in sums]
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
    assert [line.split("  ")[1] for line in lines] == sorted(
        ["BUILDINFO.txt", ASSET, PORTABLE, *kitdir.attestation_names((ASSET, PORTABLE)),
         kitdir.OWED])


def test_sha1_of_the_tarball_is_recorded(two_builds: tuple[Built, Built]) -> None:
    out = two_builds[0].out
    assert (out / "SHA1SUMS").read_text() == "".join(
        f"{hash_file(out / name).sha1}  {name}\n" for name in sorted((ASSET, PORTABLE)))
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
    # What made the gzip bytes, and the pipeline checkout (with its changes, when it has any).
    assert (info.python_version, info.zlib_version) == (platform.python_version(), compressor())
    assert info.zlib_version.startswith("libdeflate 1.")
    commit = info.run_value("pipeline_revision") or ""
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit), commit
    assert commit.endswith("-dirty") == bool(info.run_value("pipeline_changes"))
    assert info.pipeline_revision == "" and info.pipeline_commit == commit
    assert info.recipe == sha256_of(ROOT / "build" / "recipe.py")
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
    assert built.done.returncode == EXIT_ENVIRONMENT  # this machine's toolchain, not the input
    assert f"needs CUDA ≥ {needed}" in built.done.stderr
    assert "--builder docker" in built.done.stderr
    assert not (built.cache / "git").exists(), "nothing may be fetched before the check"


def test_compile_failure_shows_the_log_tail(example_repo: tuple[Path, str],
                                            tmp_path: Path, warm_ccache: Path) -> None:
    broken = changed_copy(example_repo[0], tmp_path / "broken-repo", "src/kernels/rmsnorm.cu",
                          "\nthis is not CUDA;\n")
    # the other files come from the run's warm cache: the failure is what this is about
    built = build(tmp_path / "x", "example", "--source", str(broken), "--ccache-dir",
                  str(warm_ccache), env={"GITHUB_ACTIONS": "true"})
    assert built.done.returncode == 1
    stderr = built.done.stderr
    assert "::group::compile" in stderr and "::error::compiling example failed" in stderr
    assert "compiling example failed" in stderr and "rmsnorm.cu" in stderr
    log = Path(re.findall(r"full log: (\S+)", stderr)[0])
    assert log.is_file() and "this is not CUDA" in log.read_text()
    assert stderr.count("  | ") <= 30
    assert not built.dist.exists() or not any(built.dist.iterdir())


def test_disk_full_while_packing_leaves_nothing(example_repo: tuple[Path, str],
                                               tmp_path: Path, warm_ccache: Path) -> None:
    """--dist has room at the start (the preflight's BUILD_ROOM) and fills up while the build
    runs (another writer on the same disk): the pack stops with one message, nothing of the kit
    is left. The filler is written when the build reaches its inspect step, after the preflight
    and before anything is written to --dist."""
    dist = tmp_path / "x" / "dist"
    dist.mkdir(parents=True)
    size = BUILD_ROOM + (1 << 20)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(dist)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        missing(f"a small tmpfs to fill (mount failed: {mounted.stderr.strip()})")
    filler = dist / ".filler"
    try:
        process = subprocess.Popen(
            build_command(tmp_path / "x", "example", "--source", str(example_repo[0]),
                          "--ccache-dir", str(warm_ccache)),
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp_path)
        assert process.stderr is not None
        said = []
        for line in process.stderr:
            said.append(line)
            if line.rstrip() in ("==> inspect", "::group::inspect") and not filler.exists():
                free = shutil.disk_usage(dist).free
                with filler.open("wb") as out:  # all but 48 KiB of it
                    out.write(b"\0" * (free - (48 << 10)))
        stderr = "".join(said)
        assert filler.exists(), stderr[-2000:]
        assert process.wait(timeout=600) == EXIT_ENVIRONMENT, stderr[-2000:]
        assert "no space left on device" in stderr.lower()
        assert "Traceback" not in stderr
        assert [path.name for path in dist.iterdir()] == [filler.name]
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


def test_glibc_floor_check_names_the_newer_symbol_version(c_binaries: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """A toolchain built for an older glibc (a sysroot) says which; a kit needing a newer symbol
    version fails the build, naming it and the file (glibc234 calls 2.34's
    pthread_mutex_clocklock)."""
    toolchain = load_matrix(ROOT / "matrix.toml").toolchain("trixie-cuda130")
    shutil.copy(c_binaries["glibc234"], tmp_path / "ninfer-serve")
    shutil.copy(c_binaries["runpath"], tmp_path / "ninfer")
    inspection = inspect_path(tmp_path)
    needed = inspection.floor.floor("GLIBC")
    assert needed is not None and needed.version == "2.34"
    old = dataclasses.replace(toolchain, glibc_floor="2.31")
    with pytest.raises(CheckFailed) as failed:
        check_glibc_floor(old, inspection, "portable")
    assert str(failed.value) == (
        f"the portable kit needs GLIBC_2.34 ({', '.join(needed.needed_by)}), newer than glibc "
        f"2.31, the floor of toolchain 'trixie-cuda130' (matrix.toml [toolchains.trixie-cuda130] "
        f"glibc_floor): something in the link came from the build image's own glibc, not the "
        f"sysroot's")
    assert "ninfer-serve" in str(failed.value)
    for floor in ("2.34", "2.35", None):  # the same version, a newer one, no floor declared
        check_glibc_floor(dataclasses.replace(toolchain, glibc_floor=floor), inspection, "plain")


def test_the_build_checks_the_glibc_floor_of_kits_compiled_in_the_toolchain_image(
        c_binaries: dict[str, Path], cuda_binaries: dict[str, Path], tmp_path: Path) -> None:
    """The inspect stage applies the toolchain's floor to what was compiled in its image, and
    not to what the local builder compiled with this host's own glibc."""
    from ninfer_kits.pipeline.builders import PreparedToolchain
    from ninfer_kits.pipeline.stage_functions import inspect_kit
    from ninfer_kits.pipeline.state import Assembled, BuildContext, BuildRequest

    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    kit = dataclasses.replace(kit, toolchain=dataclasses.replace(kit.toolchain,
                                                                 glibc_floor="2.31"))
    bin_dir = tmp_path / "kit" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy(cuda_binaries["shared_cudart"], bin_dir / "ninfer")  # SASS for sm_86
    shutil.copy(c_binaries["glibc234"], bin_dir / "ninfer-serve")
    request = BuildRequest(kit=kit, builder=LocalBuilder(), project=ROOT, dist_dir=tmp_path,
                           cache_dir=tmp_path, work_dir=tmp_path)
    build = BuildContext(request=request, workspace=tmp_path, staging=tmp_path / "staging",
                         started=0.0, reporter=Reporter())
    assembled = Assembled(kit_root=tmp_path / "kit", licenses=())
    in_image = PreparedToolchain(builder="docker", nvcc="nvcc", cuda_version="13.0",
                                 image="ninfer-kits/toolchain-trixie-cuda130:test")
    with pytest.raises(CheckFailed, match=r"the plain kit needs GLIBC_2\.34 \(.*ninfer-serve"):
        inspect_kit(build, in_image, assembled, "kit.tar.gz")
    on_host = dataclasses.replace(in_image, builder="local", image="")
    assert inspect_kit(build, on_host, assembled, "kit.tar.gz").name == "plain"



# --------------------------------------------------------------------------- the kit folder


def test_the_kit_folder_reads_back_as_one_checked_type(two_builds: tuple[Built, Built]) -> None:
    first, _ = two_builds
    kit = kitdir.read_kit_dir(first.out)
    assert (kit.tag, kit.asset, kit.kit, kit.verified) == (TAG, ASSET, "example", True)
    assert kit.files == tuple(sorted(p.name for p in first.out.iterdir()))
    tarball = hash_file(first.out / ASSET)
    assert (kit.sha256, kit.sha1, kit.size) == (tarball.sha256, tarball.sha1, tarball.size)
    assert kit.info == buildinfo.read(first.out / "BUILDINFO.txt")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: (d / ASSET).write_bytes((d / ASSET).read_bytes() + b"\0"),
     f"{ASSET} does not match SHA256SUMS"),
    (lambda d: (d / "BUILDINFO.txt").write_text(
        (d / "BUILDINFO.txt").read_text().replace("card: ", "card: X")),
     "BUILDINFO.txt does not match SHA256SUMS"),
    (lambda d: (d / "SHA1SUMS").write_text(re.sub(
        rf"^[0-9a-f]{{40}}(?=  {re.escape(ASSET)}$)", "0" * 40, (d / "SHA1SUMS").read_text(),
        flags=re.MULTILINE)),
     f"{ASSET} does not match SHA1SUMS"),
    (lambda d: (d / PORTABLE).write_bytes((d / PORTABLE).read_bytes() + b"\0"),
     f"{PORTABLE} does not match SHA256SUMS"),
    (lambda d: (d / PORTABLE).unlink(),
     f"BUILDINFO.txt names portable_asset {PORTABLE}, but the folder holds no portable"),
    (lambda d: (d / "build.log").unlink(), "build.log missing"),
    (lambda d: (d / "notes.txt").write_text("x"), "holds notes.txt, which is not part of"),
    (lambda d: (d / "other.tar.gz").write_bytes(b""),
     "holds 3 tarballs (ninfer-example-kit-v0.3.0-sm86-portable.tar.gz, "
     "ninfer-example-kit-v0.3.0-sm86.tar.gz, other.tar.gz)"),
    (lambda d: (d / "SHA256SUMS").write_text(
        (d / "SHA256SUMS").read_text().splitlines()[0] + "\n"), "SHA256SUMS lists"),
    (lambda d: (d / "BUILDINFO.txt").write_text(
        (d / "BUILDINFO.txt").read_text() + "card: again\n"), "key 'card': repeated"),
], ids=["tarball", "buildinfo", "sha1", "portable", "portable-missing", "missing-log",
        "extra-file", "extra-tarball", "short-sums", "repeated-key"])
def test_a_damaged_kit_folder_is_refused_naming_what_is_wrong(
        two_builds: tuple[Built, Built], tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / TAG
    shutil.copytree(two_builds[0].out, folder)
    damage(folder)
    # As `build` makes it (built=True): without build.log it would be a release of it, which
    # tests/test_kit_release.py reads.
    with pytest.raises(KitDirInvalid, match=re.escape(message)) as caught:
        kitdir.read_kit_dir(folder, built=True)
    assert str(folder) in str(caught.value) and caught.value.exit_code == EXIT_CHECK_FAILED


def test_a_tag_that_another_kit_holds_is_refused_before_the_compile(
        two_builds: tuple[Built, Built], example_repo: tuple[Path, str], tmp_path: Path) -> None:
    """Two matrix entries that render the same tag: the second build stops at fetch, names both
    kits and the tag, and leaves the first kit's folder as it was."""
    place = tmp_path / "x"
    theirs = place / "dist" / TAG
    shutil.copytree(two_builds[0].out, theirs)
    text = (theirs / "BUILDINFO.txt").read_text()
    assert "\nkit: example\n" in text
    (theirs / "BUILDINFO.txt").write_text(text.replace("\nkit: example\n", "\nkit: example-b\n"))
    before = {p.name: sha256_of(p) for p in theirs.iterdir()}
    built = build(place, "example", "--source", str(example_repo[0]))
    assert built.done.returncode == EXIT_BAD_INPUT, built.done.stderr[-2000:]
    assert (f"kits example-b and example both render the release tag '{TAG}': {theirs} holds "
            f"kit example-b") in built.done.stderr
    assert "==> compile" not in built.done.stderr and "Traceback" not in built.done.stderr
    assert {p.name: sha256_of(p) for p in theirs.iterdir()} == before
    assert sorted(p.name for p in (place / "dist").iterdir()) == [TAG]


def test_install_replaces_the_same_kit_and_rolls_back_a_failed_rename(
        two_builds: tuple[Built, Built], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = two_builds
    dist = tmp_path / "dist"
    shutil.copytree(first.out, dist / TAG)
    before = {p.name: sha256_of(p) for p in (dist / TAG).iterdir()}
    staging = dist / ".staging-example-1"
    shutil.copytree(second.out, staging)
    rename = Path.rename

    def failing(self: Path, target: Path) -> Path:  # the final rename fails (EXDEV, EIO …)
        if self == staging:
            raise OSError(errno.EIO, "Input/output error", str(self))
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(EnvironmentFailure, match="the previous kit folder is back in place"):
        kitdir.install(staging, dist, TAG, "example")
    assert {p.name: sha256_of(p) for p in (dist / TAG).iterdir()} == before
    assert sorted(p.name for p in dist.iterdir()) == [staging.name, TAG]  # nothing retired left
    monkeypatch.undo()
    placed = kitdir.install(staging, dist, TAG, "example")
    assert placed.path == dist / TAG and placed.verified
    assert sorted(p.name for p in dist.iterdir()) == [TAG]
    assert sha256_of(dist / TAG / "BUILDINFO.txt") == sha256_of(second.out / "BUILDINFO.txt")
    # And another kit's folder is never replaced, even when asked directly.
    shutil.copytree(first.out, staging)
    with pytest.raises(TagTaken, match="kits example and example-b both render"):
        kitdir.install(staging, dist, TAG, "example-b")


def test_a_second_build_of_the_same_kit_stops_naming_the_first(
        example_repo: tuple[Path, str], tmp_path: Path) -> None:
    """Two real builds, one cache: the second finds the first's lock on the kit's work folder
    and stops at once with exit status 3 and the first one's PID; the first is unharmed."""
    tool("ninja")
    needs_libcurl_headers()
    place = tmp_path / "x"
    place.mkdir()
    args = ("example", "--source", str(example_repo[0]))
    first = subprocess.Popen(build_command(place, *args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                             start_new_session=True)
    try:
        lock = place / "cache" / "work" / "example.lock"
        deadline = time.monotonic() + 60
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the first build never took the lock"
            time.sleep(0.05)
        second = build(place, *args)
        assert second.done.returncode == EXIT_ENVIRONMENT, second.done.stderr[-3000:]
        assert (f"kit example: the work folder {place / 'cache' / 'work' / 'example'} is in use "
                f"by another build (PID {first.pid})") in second.done.stderr
        assert "==> preflight" not in second.done.stderr
        assert first.poll() is None, "the second build must not disturb the first"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGINT)  # Ctrl-C, as on a terminal
        first.communicate(timeout=120)
    assert first.returncode == 130
    # The lock went with the process that held it.
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_another_revision_of_the_same_kit_is_refused_before_the_compile(
        two_builds: tuple[Built, Built], example_repo: tuple[Path, str], tmp_path: Path) -> None:
    """The example's tag has no {rev}: another commit with the same VERSION renders it too. A
    build of that commit stops at fetch, naming the folder and both revisions and the ways on,
    and leaves the kit there as it was (without the check it replaced it at the end)."""
    repo, commit = example_repo
    other = changed_copy(repo, tmp_path / "other-repo", "README.md", "\nanother commit\n")
    moved = git("rev-parse", "HEAD", cwd=other)
    place = tmp_path / "x"
    ours = place / "dist" / TAG
    shutil.copytree(two_builds[0].out, ours)
    before = {p.name: sha256_of(p) for p in ours.iterdir()}
    for args in (("--source", str(other)), ("--source", str(other), "--revision", moved[:10])):
        built = build(place, "example", *args)
        assert built.done.returncode == EXIT_BAD_INPUT, built.done.stderr[-2000:]
        assert (f"{ours} holds kit example built from revision {commit[:12]}, and this build of "
                f"revision {moved[:12]} renders the same release tag '{TAG}'"
                ) in built.done.stderr
        assert "--dist" in built.done.stderr and "--replace" in built.done.stderr
        assert "==> compile" not in built.done.stderr and "Traceback" not in built.done.stderr
        assert {p.name: sha256_of(p) for p in ours.iterdir()} == before


def test_install_replaces_another_revision_only_when_asked(
        two_builds: tuple[Built, Built], tmp_path: Path) -> None:
    """Under dist/'s lock too (a build that passed fetch's check before another one placed its
    kit): a folder of the same kit at another revision stays unless `replace_revision`."""
    first, second = two_builds
    dist = tmp_path / "dist"
    shutil.copytree(first.out, dist / TAG)
    text = (dist / TAG / "BUILDINFO.txt").read_text()
    revision = buildinfo.read(first.out / "BUILDINFO.txt").revision
    (dist / TAG / "BUILDINFO.txt").write_text(text.replace(revision, "f" * 40))
    staging = dist / ".staging-example-1"
    shutil.copytree(second.out, staging)
    with pytest.raises(TagTaken, match=f"built from revision {'f' * 12}, and this build of "
                                       f"revision {revision[:12]} renders the same release tag"):
        kitdir.install(staging, dist, TAG, "example")
    assert buildinfo.read(dist / TAG / "BUILDINFO.txt").revision == "f" * 40
    placed = kitdir.install(staging, dist, TAG, "example", replace_revision=True)
    assert placed.info.revision == revision and placed.verified
    assert sorted(p.name for p in dist.iterdir()) == [TAG]


def processes_of(marker: Path) -> list[str]:
    """The running processes (zombies aside) whose command line names `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0] if cmdline \
                else b"Z"
        except OSError:  # ended meanwhile
            continue
        if str(marker).encode() in cmdline and state not in (b"Z", b"X"):
            found.append(f"{entry.name}: {cmdline.replace(bytes(1), b' ').decode()[:300]}")
    return found


@pytest.mark.parametrize(("signum", "code", "said"), [
    (signal.SIGTERM, EXIT_TERMINATED, "ninfer-kits: terminated (SIGTERM)"),
    (signal.SIGINT, EXIT_INTERRUPTED, "ninfer-kits: interrupted"),
], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_ninfer_kits_alone_ends_the_whole_build(
        example_repo: tuple[Path, str], tmp_path: Path, signum: int, code: int,
        said: str) -> None:
    """SIGTERM (a cancelled CI job, `timeout`) or SIGINT sent to the ninfer-kits process alone,
    not to its process group, once CMake runs: when it has exited, no process of the build is
    left, the work folder's lock is free, build.log holds the output so far, dist/ is empty."""
    tool("ninja")
    needs_libcurl_headers()
    place = tmp_path / "x"
    place.mkdir()
    build_process = subprocess.Popen(
        build_command(place, "example", "--source", str(example_repo[0]), "--jobs", "1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        start_new_session=True)
    work = place / "cache" / "work"
    try:
        assert build_process.stderr is not None
        for line in build_process.stderr:
            if line.startswith("==> compile"):
                break
        deadline = time.monotonic() + 120
        while not any("/cmake -S " in process for process in processes_of(work)):
            assert build_process.poll() is None, build_process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "CMake never started"
            time.sleep(0.05)
        os.kill(build_process.pid, signum)
        _, stderr = build_process.communicate(timeout=60)
        left = processes_of(work)
    finally:
        if build_process.poll() is None:
            os.killpg(build_process.pid, signal.SIGKILL)
            build_process.wait()
    assert build_process.returncode == code, stderr[-3000:]
    assert stderr.rstrip().endswith(said), stderr[-3000:]
    assert left == []
    lock = os.open(work / "example.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new build takes it at once
    finally:
        os.close(lock)
    assert (work / "example.lock").read_text() == ""  # no PID of a build that is gone
    log = (work / "example" / "build.log").read_text()
    assert "recipe: a fresh build folder" in log and "/cmake -S " in log, log
    assert list(place.glob("dist/*")) == [] and list(place.glob("dist/.*")) == []


# --------------------------------------------------------------------------- provenance


def test_every_tag_the_matrix_renders_is_ignored_by_git_as_a_fetched_folder() -> None:
    """`fetch TAG` unpacks into ./<tag> by default: run in the checkout, that folder must not
    make the checkout dirty (the next build would name it in run.pipeline_changes)."""
    facts = RevisionFacts(revision="0123456789abcdef" * 2 + "01234567", version="1.2.3-x")
    for kit in load_matrix(ROOT / "matrix.toml").kits.values():
        tag = kit.render_tag(facts)
        done = subprocess.run([tool("git"), "check-ignore", "-q", "--no-index",
                               f"{tag}/kit/bin/ninfer"], cwd=ROOT, check=False)
        assert done.returncode == 0, f"{kit.id}: {tag}/ is not in .gitignore"
    for folder in ("dry-run", "published"):
        done = subprocess.run([tool("git"), "check-ignore", "-q", "--no-index",
                               f"{folder}/{TAG}/SHA256SUMS"], cwd=ROOT, check=False)
        assert done.returncode == 0, f"{folder}/ is not in .gitignore"
    done = subprocess.run([tool("git"), "check-ignore", "-q", "--no-index",
                           f"releases/{TAG}.toml"], cwd=ROOT, check=False)
    assert done.returncode == 1, "the ledger is committed: releases/ must stay tracked"


def test_what_commands_write_in_the_checkout_leaves_the_next_kit_alike(
        two_builds: tuple[Built, Built], example_repo: tuple[Path, str], tmp_path: Path,
        warm_ccache: Path) -> None:
    """A pipeline checkout of its own (this matrix, .gitignore and the committed kit index, one
    commit) in which publish --dry-run, a publish to the local store and a fetch ran, as a
    maintainer runs them there: the checkout stays clean (a local publish records nothing in
    the team's ledger unless asked), and a build of the same revision and toolchain gives the
    same tarballs as a build from another checkout; its commit is only in the run keys beside
    the tarball. A file of the maintainer's own makes it dirty, which the run keys
    say, and the tarballs stay the same."""
    project = tmp_path / "pipeline"
    (project / "releases").mkdir(parents=True)
    for name in ("matrix.toml", "allowed_signers", ".gitignore", "releases/index.json",
                 "releases/index.html"):
        shutil.copyfile(ROOT / name, project / name)
    # the portable kit's owed Debian sources, from an archive served here (source_archive)
    served = contextlib.ExitStack()
    table = served.enter_context(archive_for(two_builds[0].out, tmp_path / "sources"))
    with (project / "matrix.toml").open("a") as matrix:
        matrix.write(table)
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "pipeline", cwd=project)
    head = git("rev-parse", "HEAD", cwd=project)
    kit = str(two_builds[0].out)
    env = {**os.environ, "NINFER_KITS_CACHE": str(tmp_path / "cache")}
    for command in (("publish", kit, "--dry-run"), ("publish", kit, "--to", "local"),
                    ("fetch", TAG, "--from", "published", "--insecure-no-signature")):
        done = subprocess.run([sys.executable, "-m", "ninfer_kits", *command], cwd=project,
                              env=env, capture_output=True, text=True, check=False)
        # (publish without the signing key makes an unsigned release: fetch takes it only when
        # told to; its exit status is then verify's, 4 on a machine without a GPU)
        assert done.returncode in (0, 4), done.stderr[-3000:]
    served.close()
    assert (project / "dry-run" / TAG).is_dir() and (project / "published" / TAG).is_dir()
    assert (project / TAG / "kit" / "bin" / "ninfer").is_file()
    status = git("status", "--porcelain", "--untracked-files=all", cwd=project)
    assert status == "", status
    (project / "notes.txt").write_text("a maintainer's own file\n")
    # (the compiles are not what this is about: they come from the session's warm cache)
    built = build(tmp_path / "again", "example", "--source", str(example_repo[0]),
                  "--matrix", str(project / "matrix.toml"),  # the last --matrix counts
                  "--ccache-dir", str(warm_ccache))
    assert built.done.returncode == 0, built.done.stderr[-4000:]
    for name in (ASSET, PORTABLE):
        assert sha256_of(built.out / name) == sha256_of(two_builds[0].out / name), name
    info = buildinfo.read(built.out / "BUILDINFO.txt")
    assert info.run_value("pipeline_revision") == f"{head}-dirty"
    assert info.run_value("pipeline_changes") == "notes.txt"
    assert info.pipeline_revision == "" and re.fullmatch(r"[0-9a-f]{64}", info.recipe)


def test_the_pipeline_checkout_is_recorded_dirty_with_its_changes(tmp_path: Path) -> None:
    repo = tmp_path / "pipeline"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "matrix.toml").write_text("x\n")
    (repo / "old.py").write_text("y\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "c", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo)
    assert pipeline_checkout(repo) == type(pipeline_checkout(repo))(sha, "")
    (repo / "matrix.toml").write_text("changed\n")
    (repo / "new file.py").write_text("z\n")
    git("mv", "old.py", "renamed.py", cwd=repo)
    dirty = pipeline_checkout(repo)
    assert dirty.revision == f"{sha}-dirty"
    assert dirty.changes == "matrix.toml, new file.py, renamed.py"
    assert pipeline_checkout(tmp_path / "nowhere").revision.startswith("unknown")


def test_a_hanging_nvidia_smi_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "sleeper.pid"
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    assert driver_and_gpu(timeout=0.5) == ("unknown (nvidia-smi did not answer in 0.5 s)",
                                           "unknown")
    assert time.monotonic() - started < 10
    sleeper = Path(f"/proc/{pid_file.read_text().strip()}")
    deadline = time.monotonic() + 5
    while sleeper.exists() and "Z" not in (sleeper / "stat").read_text().split()[2:3]:
        assert time.monotonic() < deadline, "the probe's child outlived it"
        time.sleep(0.05)


# --------------------------------------------------------------------------- exit codes, builders


def test_exit_codes_are_documented_in_help_and_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for argv in (["--help"], ["build", "--help"], ["inspect", "--help"]):
        shown = subprocess.run([sys.executable, "-m", "ninfer_kits", *argv], capture_output=True,
                               text=True, check=True).stdout
        assert exit_codes_help() in shown, argv
    for code, _ in EXIT_CODES:
        assert f"| `{code}` |" in readme, code


@pytest.mark.parametrize(("error", "code"), [
    (OSError(errno.ENOSPC, "No space left on device", "/dist/x"), EXIT_ENVIRONMENT),
    (OSError(errno.EIO, "Input/output error", "/dist/x"), EXIT_ENVIRONMENT),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), EXIT_ENVIRONMENT),
    (OSError(errno.ENOENT, "No such file or directory"), EXIT_ENVIRONMENT),  # no path named
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "kit.tar.gz"), EXIT_BAD_INPUT),
    (PermissionError(errno.EACCES, "Permission denied", "/root/x"), EXIT_BAD_INPUT),
])
def test_an_os_error_is_bad_input_only_when_it_is_about_a_path(error: OSError, code: int) -> None:
    assert exit_code_for(error) == code


def test_builders_come_from_the_registry_and_load_when_chosen() -> None:
    assert list(BUILDERS) == ["local", "docker"]
    assert isinstance(make_builder("local", BuilderOptions()), LocalBuilder)
    with pytest.raises(BadInput, match="--ccache-volume is for the docker builder"):
        make_builder("local", BuilderOptions(ccache_volume="v"))
    with pytest.raises(BadInput, match=r"unknown builder 'dockr'.*did you mean 'docker'"):
        make_builder("dockr", BuilderOptions())
    probe = ("import sys; from ninfer_kits.pipeline.builders import make_builder, "
             "BuilderOptions; make_builder('local', BuilderOptions()); "
             "print(sorted(m for m in sys.modules if 'docker' in m))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout
    assert loaded.strip() == "[]"  # the docker builder (and SDK) only when asked for
    shown = subprocess.run([sys.executable, "-m", "ninfer_kits", "build", "--help"],
                           capture_output=True, text=True, check=True).stdout
    for entry in BUILDERS.values():
        assert f"{entry.name}: " in " ".join(shown.split())
