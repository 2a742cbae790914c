"""The built-in example engine (examples/engine): a real CMake + CUDA build, once per session.

The fixture makes a git repository of the example, as the kit pipeline gets an upstream, and
builds it for sm_86 with CMake and Ninja. No GPU is needed: `ninfer` reports the CUDA error.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import read_elf

from tools import ROOT, cuobjdump, git, needs_libcurl_headers, nvcc, run, tool

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "engine"
BUILD_INFO = "ninfer-kits test build"
MODELS = {
    "object": "list",
    "data": [{"id": "example", "object": "model", "owned_by": "ninfer-example"}],
}


@dataclass(frozen=True)
class ExampleBuild:
    source: Path
    build: Path
    commit: str

    @property
    def ninfer(self) -> Path:
        return self.build / "apps" / "ninfer"

    @property
    def serve(self) -> Path:
        return self.build / "apps" / "ninfer-serve"


def cmake_configure(source: Path, build: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [
        tool("cmake"),
        "-S",
        str(source),
        "-B",
        str(build),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_CUDA_COMPILER={nvcc()}",
        *options,
    ]
    env = {key: value for key, value in os.environ.items() if key != "CUDAARCHS"}
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


@pytest.fixture(scope="session")
def example_build(
    example_repo: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> ExampleBuild:
    tool("ninja")
    needs_libcurl_headers()
    source, commit = example_repo
    build = tmp_path_factory.mktemp("example-build")
    configured = cmake_configure(
        source,
        build,
        "-DCMAKE_CUDA_ARCHITECTURES=86",
        f"-DNINFER_BUILD_INFO={BUILD_INFO} {commit[:12]}",
    )
    assert configured.returncode == 0, configured.stdout[-3000:] + configured.stderr[-3000:]
    run(tool("cmake"), "--build", build, "-j2")
    return ExampleBuild(source=source, build=build, commit=commit)


def test_repository_commit_is_reproducible(example_repo: tuple[Path, str]) -> None:
    repo, commit = example_repo
    assert git("status", "--porcelain", cwd=repo) == ""
    assert git("log", "-1", "--format=%an <%ae> %aI %cI", cwd=repo) == (
        "ninfer-kits tests <tests@ninfer-kits.invalid> 2025-01-01T00:00:00+00:00 "
        "2025-01-01T00:00:00+00:00"
    )
    assert re.fullmatch(r"[0-9a-f]{40}", commit)


def test_both_apps_are_built(example_build: ExampleBuild) -> None:
    for app in (example_build.ninfer, example_build.serve):
        assert app.is_file() and os.access(app, os.X_OK), app


def test_version_line(example_build: ExampleBuild) -> None:
    version = (EXAMPLE / "VERSION").read_text().strip()
    assert version == "0.3.0-example"
    for app, name in ((example_build.ninfer, "ninfer"), (example_build.serve, "ninfer-serve")):
        line = run(app, "--version").strip()
        assert re.fullmatch(
            rf"{re.escape(name)} {re.escape(version)} \(sm_86, CUDA 1[3-9]\.\d+, "
            rf"build: {re.escape(BUILD_INFO)} {example_build.commit[:12]}\)",
            line,
        ), line


def test_help_and_bad_options(example_build: ExampleBuild) -> None:
    assert "usage: ninfer" in run(example_build.ninfer, "--help")
    assert "--once" in run(example_build.serve, "--help")
    for app in (example_build.ninfer, example_build.serve):
        result = subprocess.run(
            [app, "--no-such-option"], capture_output=True, text=True, check=False
        )
        assert result.returncode == 2
        assert "unknown or incomplete option '--no-such-option'" in result.stderr


def test_ninfer_reports_devices_or_the_cuda_error(example_build: ExampleBuild) -> None:
    out = run(example_build.ninfer)  # run() asserts exit code 0
    assert out.splitlines()[0].startswith("ninfer 0.3.0-example (sm_86")
    assert re.search(r"^libcurl: libcurl/\d+\.\d+", out, re.MULTILINE), out
    devices = re.search(r"^CUDA devices: (\d+)(?: \(CUDA error: (.+)\))?$", out, re.MULTILINE)
    assert devices is not None, out
    if int(devices.group(1)) == 0:
        assert devices.group(2), out  # the CUDA error string, e.g. "CUDA driver version is ..."
        assert "kernel smoke test: skipped (no CUDA device)" in out
    else:
        assert re.search(r"^  device 0: .+ \(sm_\d+", out, re.MULTILINE), out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fetch_once(serve: Path, path: str) -> tuple[int, dict[str, object], str]:
    """Starts `ninfer-serve --once` on a free port, requests `path`, and waits for the exit."""
    port = free_port()
    process = subprocess.Popen(
        [serve, "--host", "127.0.0.1", "--port", str(port), "--once"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
                    status, body = reply.status, reply.read().decode()
                break
            except urllib.error.HTTPError as error:
                status, body = error.code, error.read().decode()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert f"listening on http://127.0.0.1:{port}" in stdout
    return status, json.loads(body), body


def test_serve_answers_models(example_build: ExampleBuild) -> None:
    status, payload, body = fetch_once(example_build.serve, "/v1/models")
    assert status == 200
    assert payload == MODELS
    assert body == json.dumps(MODELS, separators=(",", ":"))


def test_serve_answers_404_with_escaped_json(example_build: ExampleBuild) -> None:
    status, payload, _ = fetch_once(example_build.serve, "/v2/%22quoted%22")
    assert status == 404
    assert payload["error"] == {
        "message": "no route for /v2/%22quoted%22",
        "type": "not_found",
        "code": 404,
    }


def test_needed_libraries(example_build: ExampleBuild) -> None:
    readelf = tool("readelf")
    for app in (example_build.ninfer, example_build.serve):
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(readelf, "-d", app))
        assert "libcudart.so.13" in needed, needed
        assert "libcurl.so.4" in needed, needed
        assert "libstdc++.so.6" in needed, needed


def kernel_files() -> list[Path]:
    return sorted((EXAMPLE / "src" / "kernels").glob("*.cu"))


def test_kernel_files_are_built_into_the_library() -> None:
    cmake = (EXAMPLE / "CMakeLists.txt").read_text()
    files = kernel_files()
    assert len(files) >= 12, [f.name for f in files]  # enough for a one-file rebuild to be cheap
    for kernel in files:
        assert f"src/kernels/{kernel.name}" in cmake, kernel.name


def test_both_apps_carry_the_upstreams_device_code_layout(example_build: ExampleBuild) -> None:
    """As the upstreams build (separable compilation): every kernel file's object brings a
    relocatable fatbin (SASS + PTX, inputs of the device link), and the device
    link makes the one loaded fatbin: sm_86 SASS, no PTX (cuobjdump agrees)."""
    for app in (example_build.ninfer, example_build.serve):
        info = read_elf(app)
        loaded = [entry for entry in info.device_code if entry.loadable]
        relocatable = [entry for entry in info.device_code if not entry.loadable]
        assert [(entry.kind, entry.arch) for entry in loaded] == [("sass", "sm_86")], loaded
        assert len([e for e in relocatable if e.kind == "sass"]) == len(kernel_files())
        assert {e.arch for e in relocatable} == {"sm_86", "compute_86"}
        listed = subprocess.run([cuobjdump(), "--list-ptx", app], capture_output=True,
                                text=True, check=False)
        assert "No PTX file found" in listed.stdout + listed.stderr
        # The kernels sit in anonymous namespaces, so their symbols carry nvcc's module name,
        # which holds the file name: _<hash>_10_rmsnorm_cu_<hash>.
        data = app.read_bytes()
        for kernel in kernel_files():
            module = f"_{len(kernel.name)}_{kernel.stem}_cu_".encode()
            assert module in data, (app.name, kernel.name)


def test_apps_link_ffmpeg_as_the_upstreams_do(example_build: ExampleBuild) -> None:
    needed = read_elf(example_build.ninfer).needed
    for family in ("libavformat.so.", "libavcodec.so.", "libavutil.so.", "libswscale.so."):
        assert any(name.startswith(family) for name in needed), (family, needed)
    assert re.search(r"^FFmpeg: libavformat \d+\.\d+\.\d+, libavcodec",
                     run(example_build.ninfer), re.MULTILINE)


def _compile_trigger(folder: Path, *extra: str) -> bytes:
    """dequant_rows.cu as the recipe compiles it (C++20, -rdc, -lineinfo, -objtemp), in its
    own process each time; the object's bytes."""
    kernels = EXAMPLE / "src" / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(nvcc()), "-std=c++20", "-O3", "-rdc=true", "-lineinfo", "-objtemp",
                    "-arch=sm_86", f"-I{EXAMPLE / 'include'}", "-c",
                    str(kernels / "dequant_rows.cu"), "-o", "dequant_rows.o", *extra],
                   cwd=folder, check=True, capture_output=True)
    return (folder / "dequant_rows.o").read_bytes()


def test_rdc_naming_trigger_needs_the_random_seed(tmp_path: Path) -> None:
    """The shape the upstreams have (a templated kernel in an anonymous namespace in a header,
    fp16/bf16 intrinsics, __syncwarp, a throwing host function, -rdc): nvcc names internal
    symbols from a per-process number, so two compiles differ; -frandom-seed fixes it. The
    first half is what makes the reproducibility tests able to fail."""
    unseeded = {_compile_trigger(tmp_path / f"plain-{i}") for i in range(3)}
    assert len(unseeded) > 1, "nvcc no longer varies here: the trigger tests nothing"
    seed = "-frandom-seed=src/kernels/dequant_rows.cu"
    seeded = {_compile_trigger(tmp_path / f"seeded-{i}", seed) for i in range(2)}
    assert len(seeded) == 1


def test_a_plain_build_records_its_source_folder(example_build: ExampleBuild) -> None:
    """Built as a user would (plain CMake, no recipe), -lineinfo writes the source folder into
    the device code, as in the upstreams: the kit builds must remove it (tests/test_build.py)."""
    for app in (example_build.ninfer, example_build.serve):
        assert str(example_build.source).encode() in app.read_bytes(), app


@pytest.mark.parametrize(
    "arch", ["90", "86;120a", "native", None], ids=["90", "list", "native", "unset"]
)
def test_unsupported_architecture_is_refused(
    example_repo: tuple[Path, str], tmp_path: Path, arch: str | None
) -> None:
    source, _ = example_repo
    options = [] if arch is None else [f"-DCMAKE_CUDA_ARCHITECTURES={arch}"]
    result = cmake_configure(source, tmp_path / "build", *options)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "86 89 120a" in message, message
    if arch is None:
        assert "CMAKE_CUDA_ARCHITECTURES is not set" in message
    else:
        assert f"Unsupported CUDA architecture '{arch}'" in message
        assert "exactly one CUDA architecture" in message
