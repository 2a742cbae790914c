"""Messages that send the user the right way: each run as a user runs it (a subprocess of the
real CLI), each asserting the one error line, the exit status of README's table, no traceback.
Publish's and watch's have tests beside theirs (test_publish*.py, test_watch.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tools import ROOT

MATRIX = ROOT / "matrix.toml"


def ninfer_kits(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
                prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`ninfer-kits ARGS` in a fresh process, in `cwd`, with none of the caller's matrix,
    tokens or engine; `prelude` runs first (Python, in the same process)."""
    environ = {key: value for key, value in os.environ.items()
               if key not in ("NINFER_KITS_MATRIX", "GITHUB_TOKEN", "GH_TOKEN", "DOCKER_HOST",
                              "NINFER_KITS_B2_URL")}
    environ.update(env or {})
    code = f"{prelude}\nimport sys\nfrom ninfer_kits.cli import main\nsys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line that says what is wrong (there must be exactly one)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ninfer-kits")]
    assert len(lines) == 1, done.stderr
    return lines[0]


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("command", [
    ("build", "example"), ("kit-url", "example"), ("fetch", "example"), ("matrix",),
    ("publish", "example"), ("watch",), ("verify", "kit"), ("diff", "a", "b"),
])
def test_an_unknown_option_shows_the_subcommands_usage(command: tuple[str, ...],
                                                       tmp_path: Path) -> None:
    done = ninfer_kits(*command, "--no-such-option", cwd=tmp_path)
    assert done.returncode == 2
    assert error_line(done) == (f"ninfer-kits {command[0]}: error: unrecognized arguments: "
                                f"--no-such-option")
    assert done.stderr.startswith(f"usage: ninfer-kits {command[0]} "), done.stderr


@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_below_one_is_refused_before_anything_runs(jobs: str, tmp_path: Path) -> None:
    # --jobs 0 used to mean "the default" and start a build; leaving --jobs out is that.
    done = ninfer_kits("build", "example", "--matrix", MATRIX, "--jobs", jobs, "--cache-dir",
                       tmp_path / "cache", "--dist", tmp_path / "dist", cwd=tmp_path)
    assert done.returncode == 2
    assert error_line(done) == f"ninfer-kits: error: --jobs must be 1 or more, got {jobs}"
    assert not (tmp_path / "cache").exists() and not (tmp_path / "dist").exists()


# --------------------------------------------------------------------------- kit-url, fetch


@pytest.mark.parametrize("command", [
    ("kit-url", "exampel"), ("kit-url", "exampel", "--from", "b2"),
    ("fetch", "exampel", "--from", "."), ("fetch", "exmaple"), ("fetch", "exmaple", "--auto"),
])
def test_a_misspelt_kit_names_the_nearest_kit(command: tuple[str, ...], tmp_path: Path) -> None:
    # GitHub's API and the kit index on a port where nothing listens: a request would exit 3
    api = f"http://127.0.0.1:{_unused_port()}"
    done = ninfer_kits(*command, "--matrix", MATRIX, "--api", api, "--index", "none",
                       cwd=tmp_path)
    assert done.returncode == 2
    line = error_line(done)
    typo = command[1]
    said = "with --auto, name a kit of the matrix, or none" if "--auto" in command else \
        "a name this close to a kit's is not looked up as a release tag"
    assert f"unknown kit '{typo}'; did you mean 'example'? ({said}" in line, line
    assert "NINFER_KITS_B2_URL" not in line  # setting it would not help: the asset is unknown
    assert list(tmp_path.iterdir()) == []  # fetch made no folder


@pytest.mark.parametrize("tag", ["example-v0.3.0-linux-sm120a", "example-v1",
                                 "example-v0.3.0-linux-sm86-glibc2.28",
                                 "ninfer-all-v1.0-linux-sm89-abcdef12"])
def test_a_tag_that_starts_with_a_kits_name_is_looked_up_not_refused(tag: str,
                                                                     tmp_path: Path) -> None:
    done = ninfer_kits("kit-url", tag, "--matrix", MATRIX, "--index", "none", cwd=tmp_path)
    assert done.returncode == 2
    line = error_line(done)
    assert line == (f"ninfer-kits: error: {tag}: the asset's name is not known without the "
                    f"ledger or the GitHub API (fetch finds it)"), line


def test_a_name_near_no_kit_is_taken_as_a_tag_without_a_guess(tmp_path: Path) -> None:
    done = ninfer_kits("kit-url", "v9.9.9-something-else", "--matrix", MATRIX, "--index", "none",
                       cwd=tmp_path)
    assert done.returncode == 2
    assert "did you mean" not in error_line(done)


@pytest.mark.parametrize("command,why", [
    (("kit-url", "example"), "without one, name a release tag and --repository OWNER/NAME"),
    (("kit-url", "example", "--from", "b2"), "B2's bucket is named in its [publish.b2]"),
    (("fetch", "example"), "without one, name a release tag and --repository OWNER/NAME"),
])
def test_a_missing_matrix_file_is_said_as_such(command: tuple[str, ...], why: str,
                                              tmp_path: Path) -> None:
    done = ninfer_kits(*command, cwd=tmp_path)
    assert done.returncode == 2
    assert error_line(done) == (f"ninfer-kits: error: matrix file not found: matrix.toml (give "
                                f"--matrix PATH or set NINFER_KITS_MATRIX; {why})")
    gone = ninfer_kits(*command, "--matrix", tmp_path / "gone.toml", cwd=tmp_path)
    assert gone.returncode == 2
    assert f"matrix file not found: {tmp_path / 'gone.toml'}" in error_line(gone)
    assert list(tmp_path.iterdir()) == []  # fetch made no folder


# --------------------------------------------------------------------------- the docker builder


def test_ssh_docker_host_without_paramiko_says_what_to_install(tmp_path: Path) -> None:
    # paramiko is the docker SDK's ssh:// transport; made unimportable as when not installed.
    done = ninfer_kits("build", "example", "--builder", "docker", "--matrix", MATRIX, "--jobs",
                       "1", "--cache-dir", tmp_path / "cache", "--dist", tmp_path / "dist",
                       cwd=tmp_path, env={"DOCKER_HOST": "ssh://builder@127.0.0.1"},
                       prelude="import sys; sys.modules['paramiko'] = None")
    assert done.returncode == 3
    assert error_line(done) == ('ninfer-kits: error: DOCKER_HOST=ssh://builder@127.0.0.1 needs '
                                'paramiko, which is not installed: pip install "docker[ssh]"')


@pytest.fixture(scope="module")
def engine() -> str:
    """The Docker engine's DOCKER_HOST ("" for the local socket); these tests need no image."""
    from docker_fixtures import ensure_engine

    return ensure_engine()


def project_with(tmp_path: Path, old: str, new: str, *more: tuple[str, str]) -> Path:
    """This project's matrix (texts replaced: old by new, then each pair of `more`), recipe and
    Dockerfiles in a folder of the test's own; returns the matrix file."""
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    shutil.copy(ROOT / "build" / "recipe.py", project / "build" / "recipe.py")
    shutil.copytree(ROOT / "dockerfiles", project / "dockerfiles")
    text = MATRIX.read_text()
    for before, after in ((old, new), *more):
        assert before in text, before
        text = text.replace(before, after)
    (project / "matrix.toml").write_text(text)
    shutil.copy(ROOT / "allowed_signers", project / "allowed_signers")  # [publish.signing]'s
    return project / "matrix.toml"


def build_in_docker(kit: str, matrix: Path, tmp_path: Path, engine: str
                    ) -> subprocess.CompletedProcess[str]:
    return ninfer_kits("build", kit, "--builder", "docker", "--matrix", matrix, "--jobs", "1",
                       "--cache-dir", tmp_path / "cache", "--dist", tmp_path / "dist",
                       cwd=tmp_path, env={"DOCKER_HOST": engine} if engine else {})


def test_a_missing_cuda_base_image_points_to_the_toolchains_that_build_anywhere(
        engine: str, tmp_path: Path) -> None:
    # The Ubuntu toolchain's base, under a tag of this test's own that no engine has and no
    # registry serves, as the toolchain of two production kits.
    base = f"nvidia/cuda:13.1.2-devel-ubuntu24.04-{uuid.uuid4().hex[:12]}"
    matrix = project_with(tmp_path, 'base_image = "nvidia/cuda:13.1.2-devel-ubuntu24.04"',
                          f'base_image = "{base}"', *(
                              (f'arch = "{arch}"\ntoolchain = "{toolchain}"',
                               f'arch = "{arch}"\ntoolchain = "ubuntu2404-cuda131"')
                              for arch, toolchain in (("sm_120a", "bullseye-sysroot-cuda131"),
                                                      ("sm_86", "bullseye-sysroot-cuda130"))))
    done = build_in_docker("ninfer-3090-sm86", matrix, tmp_path, engine)
    assert done.returncode == 3
    line = error_line(done)
    assert f"base image {base} (toolchain ubuntu2404-cuda131) cannot be had" in line, line
    assert "make-base-image.sh nvidia" not in line  # a Debian root under NVIDIA's name
    assert line.endswith("docker pull / docker load it on that engine where a registry is "
                         "reachable (no Debian root made by scripts/make-base-image.sh stands in "
                         "for it), or build kit ninfer-3090-sm86 with a toolchain of the matrix "
                         "that builds anywhere (Debian packages and NVIDIA's PyPI wheels): "
                         "trixie-cuda130 (CUDA 13.0.88), bullseye-sysroot-cuda130 (CUDA 13.0.88) "
                         "or bullseye-sysroot-cuda131 (CUDA 13.1.115), as its toolchain in "
                         "[kits.ninfer-3090-sm86]"), line
    # A kit whose upstream needs CUDA 13.1 is offered only the toolchain that has it.
    done = build_in_docker("ninfer-sm120a", matrix, tmp_path, engine)
    assert done.returncode == 3
    assert error_line(done).endswith(": bullseye-sysroot-cuda131 (CUDA 13.1.115), as its "
                                     "toolchain in [kits.ninfer-sm120a]")


def test_a_missing_debian_base_image_is_made_by_make_base_image(engine: str,
                                                               tmp_path: Path) -> None:
    base = f"ninfer-kits/debian-trixie-base:missing-{uuid.uuid4().hex[:12]}"
    matrix = project_with(tmp_path, 'base_image = "ninfer-kits/debian-trixie-base:local"',
                          f'base_image = "{base}"')
    done = build_in_docker("example", matrix, tmp_path, engine)
    assert done.returncode == 3
    line = error_line(done)
    assert f"base image {base} (toolchain trixie-cuda130) cannot be had" in line, line
    assert line.endswith("It is a plain Debian root (the toolchain's Dockerfile adds CUDA from "
                         f"NVIDIA's PyPI wheels): make it with scripts/make-base-image.sh {base} "
                         "trixie, or docker pull / docker load it where a registry is "
                         "reachable"), line


def test_a_missing_runtime_base_image_fails_before_the_compile(engine: str,
                                                               tmp_path: Path) -> None:
    # The smoke test's image comes FROM it, after the compile: the build must not spend its
    # minutes first (seen: a portable toolchain's 10-minute build, then this line).
    from docker_fixtures import BASE_IMAGE, MINBASE_IMAGE, ensure_base_image

    ensure_base_image(BASE_IMAGE)  # the toolchain's base is there
    base = f"ninfer-kits/debian-trixie-minbase:missing-{uuid.uuid4().hex[:12]}"
    matrix = project_with(tmp_path, f'runtime_base_image = "{MINBASE_IMAGE}"',
                          f'runtime_base_image = "{base}"')
    done = build_in_docker("example", matrix, tmp_path, engine)
    assert done.returncode == 3
    line = error_line(done)
    assert f"base image {base} (toolchain trixie-cuda130) cannot be had" in line, line
    assert f"make it with scripts/make-base-image.sh {base} trixie --include ''" in line, line
    assert "==> compile" not in done.stderr and "==> fetch" not in done.stderr, done.stderr


def test_kit_url_does_not_send_the_user_to_fetch(tmp_path: Path) -> None:
    # `example`'s tag needs its VERSION, known after a build; no release of it is recorded.
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX.read_text())  # with no releases/ beside it
    shutil.copy(ROOT / "allowed_signers", tmp_path / "allowed_signers")  # [publish.signing]'s
    done = ninfer_kits("kit-url", "example", "--matrix", matrix, "--index", "none",
                       cwd=tmp_path)
    assert done.returncode == 2
    line = error_line(done)
    assert line.endswith(f"there is no release of it in the ledger ({tmp_path / 'releases'}): "
                         f"name the release's tag instead of the kit"), line
    assert "fetch" not in line


def test_an_unreachable_remote_engine_is_not_told_to_start_one_here(tmp_path: Path) -> None:
    port = _unused_port()
    done = build_in_docker("example", MATRIX, tmp_path, f"tcp://127.0.0.1:{port}")
    assert done.returncode == 3
    line = error_line(done)
    assert line.startswith(f"ninfer-kits: error: no Docker engine answers at "
                           f"tcp://127.0.0.1:{port} ("), line
    assert line.endswith(f"check that the engine at tcp://127.0.0.1:{port} runs and is reachable "
                         f"from here, or unset DOCKER_HOST to use a local one"), line
    assert "start-docker-engine" not in line


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_repro_keeps_its_builds_exit_status(tmp_path: Path) -> None:
    # The first build finds no engine (3: the environment); repro said 1, "a check failed".
    engine = f"tcp://127.0.0.1:{_unused_port()}"
    done = ninfer_kits("repro", "example", "--builder", "docker", "--matrix", MATRIX,
                       cwd=tmp_path, env={"DOCKER_HOST": engine})
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines()[-1] == ("ninfer-kits: error: repro: the first build of "
                                            "example failed (exit 3); its output is above")
    assert f"no Docker engine answers at {engine}" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_option_before_the_command_is_the_top_parsers(tmp_path: Path) -> None:
    done = ninfer_kits("--no-such-option", "inspect", "/bin/true", cwd=tmp_path)
    assert done.returncode == 2
    assert error_line(done) == "ninfer-kits: error: unrecognized arguments: --no-such-option"
    assert done.stderr.startswith("usage: ninfer-kits [-h]"), done.stderr


def make_kit_base_images(*args: str, matrix: Path = MATRIX) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "make-kit-base-images.py"),
                           "--matrix", str(matrix), *args],
                          capture_output=True, text=True, check=False, timeout=600)


def test_make_kit_base_images_makes_no_base_for_a_pinned_image(engine: str,
                                                                tmp_path: Path) -> None:
    """A kit whose toolchain is pinned by digest needs no base (the build pulls its images),
    and a base pinned by digest is pulled by the build, never debootstrapped; `--toolchain ID`
    (toolchains.yml, which builds the toolchain anew) wants the bases even so."""
    from docker_fixtures import BASE_IMAGE, MINBASE_IMAGE, ensure_base_image

    ensure_base_image(BASE_IMAGE)
    ensure_base_image(MINBASE_IMAGE, include="")
    pin = "127.0.0.1:5000/kits/ninfer-kits-toolchain-x:0123456789abcdef@sha256:" + "ab" * 32
    head, cuda131, tail = MATRIX.read_text(encoding="utf-8").partition(
        "[toolchains.bullseye-sysroot-cuda131]\n")
    head = head.replace("[toolchains.bullseye-sysroot-cuda130]\n",
                        f'[toolchains.bullseye-sysroot-cuda130]\nimage = "{pin}"\n'
                        f'runtime_image = "{pin}"\n')
    tail = tail.replace('base_image = "ninfer-kits/debian-trixie-base:local"',
                        f'base_image = "{pin}"', 1)
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(head + cuda131 + tail, encoding="utf-8")
    shutil.copy(ROOT / "allowed_signers", tmp_path / "allowed_signers")
    pinned = make_kit_base_images("ninfer-3090-sm86", matrix=matrix)  # bullseye-sysroot-cuda130
    assert (pinned.returncode, pinned.stderr) == (0, ""), pinned.stderr
    assert pinned.stdout.splitlines() == [
        f"make-kit-base-images: the {role} image of toolchain bullseye-sysroot-cuda130 is "
        f"pinned ({pin}): pulled by the build, no base needed" for role in ("toolchain",
                                                                              "runtime")]
    # cuda131: its base pinned (pulled), its runtime's base a Debian root as before
    part = make_kit_base_images("example-sm120a", matrix=matrix)
    assert (part.returncode, part.stderr) == (0, ""), part.stderr
    assert part.stdout.splitlines() == [
        f"make-kit-base-images: {MINBASE_IMAGE} is on the engine already"]
    renewing = make_kit_base_images("--toolchain", "bullseye-sysroot-cuda130", matrix=matrix)
    assert renewing.stdout.splitlines() == [
        f"make-kit-base-images: {image} is on the engine already"
        for image in (BASE_IMAGE, MINBASE_IMAGE)], renewing.stdout


def test_make_kit_base_images_finds_the_debian_roots_an_engine_has(engine: str) -> None:
    """rebuild.yml's step before a build: the Debian roots of the kit's toolchain and runtime
    images, each once, made where missing (here the suite made them: each is found), and no
    other base (the Ubuntu toolchain's nvidia/cuda, which the build pulls)."""
    from docker_fixtures import BASE_IMAGE, MINBASE_IMAGE, ensure_base_image

    ensure_base_image(BASE_IMAGE)
    ensure_base_image(MINBASE_IMAGE, include="")
    done = make_kit_base_images("example-glibc228", "example-sm120a", "example")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines() == [
        f"make-kit-base-images: {image} is on the engine already"
        for image in (BASE_IMAGE, MINBASE_IMAGE)]
    unknown = make_kit_base_images("example", "no-such-kit")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.startswith("make-kit-base-images: unknown kit 'no-such-kit' (known: ")
    assert "Traceback" not in unknown.stderr and unknown.stderr.count("\n") == 1


# --------------------------------------------------------------------------- issue 39's walk


def _project(tmp_path: Path) -> Path:
    """This project's matrix in a folder of the test's own, with an empty ledger beside it."""
    folder = tmp_path / "project"
    (folder / "releases").mkdir(parents=True)
    shutil.copy(MATRIX, folder / "matrix.toml")
    shutil.copy(ROOT / "allowed_signers", folder / "allowed_signers")  # [publish.signing]'s
    return folder / "matrix.toml"


@pytest.mark.parametrize("command", [("fetch", "--auto"), ("fetch", "--auto", "--dry-run"),
                                     ("fetch", "example"), ("kit-url", "example"),
                                     ("kit-url", "v9-a-tag"), ("kit-url", "v9-a-tag", "--from",
                                                               "b2"),
                                     ("kit-url", "ninfer-3090-sm86", "--from", "b2")])
def test_a_kit_index_that_does_not_answer_is_the_networks_failure(
        command: tuple[str, ...], tmp_path: Path) -> None:
    # It exited 2 (bad input), the index's failure spliced into the middle of another sentence.
    matrix = _project(tmp_path)
    index = f"http://127.0.0.1:{_unused_port()}/index.json"
    done = ninfer_kits(*command, "--matrix", matrix, "--index", index, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    assert f"in the ledger ({matrix.parent / 'releases'}), and the kit index {index}, which may " \
           f"record it, did not answer (connection refused): try again when it can be " \
           f"reached, or " in line, line
    assert line.count(index) == 1, line


def test_kit_url_of_a_release_published_to_a_folder_says_where_it_is_recorded(
        tmp_path: Path) -> None:
    # It said "the newest release of it is T (the ledger …)", then "T is not in the ledger".
    from test_fetch import write_ledger

    matrix = _project(tmp_path)
    release = tmp_path / "out" / "example-v0.3.0-linux-sm86"
    release.mkdir(parents=True)
    (release / "example-kit-v0.3.0-sm86.tar.gz").write_bytes(b"kit")
    (release / "SHA256SUMS").write_text("")
    tag = release.name
    entry = write_ledger(matrix, release, {"local": release.as_uri()}, tag=tag, kit="example")
    done = ninfer_kits("kit-url", "example", "--matrix", matrix, "--index", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"/releases/download/{tag}/example-kit-v0.3.0-sm86.tar.gz\n")
    assert f"the newest release of it is {tag} (the ledger {entry})" in done.stderr
    assert f"{tag} is recorded in the ledger {entry} as published to local, not to GitHub: " \
           f"the URL follows from the matrix's tag and asset; it answers once that release is " \
           f"published to GitHub" in done.stderr, done.stderr
    assert "is not in" not in done.stderr


@pytest.mark.parametrize("store,module,distribution", [("github", "github", "PyGithub"),
                                                       ("b2", "b2sdk", "b2sdk")])
def test_publish_names_the_missing_extra_before_the_missing_credentials(
        store: str, module: str, distribution: str, tmp_path: Path, kit: Any) -> None:
    # It asked for GITHUB_TOKEN first; with the token set, it then said PyGithub is missing.
    from ninfer_kits.matrix import GitHubTarget
    from ninfer_kits.stores.b2 import B2Target
    from test_publish_support import matrix_file

    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                       api="http://127.0.0.1:9/api/v3"),
                         b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    done = ninfer_kits("publish", kit.path, "--matrix", matrix, "--to", store, "--cache-dir",
                       tmp_path / "c", cwd=tmp_path,
                       prelude=f"import sys; sys.modules[{module!r}] = None")  # not installed
    assert done.returncode == 3, done.stderr
    assert error_line(done) == (
        f"ninfer-kits: error: `ninfer-kits publish` needs {distribution}, which is not "
        f"installed here: install the 'publish' extra: pip install 'ninfer-kits[publish]' "
        f"(from a checkout: pip install '.[publish]')")
