"""The smoke test's oracle is the dynamic loader: its trace of real binaries, read back.

The binaries are compiled here: a program that needs a library which is absent, and one that
needs a symbol version its library does not define (the `GLIBCXX_3.4.32 not found` kind).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ninfer_kits.pipeline.smoke import read_trace, trace_script

from tools import tool

INTERPRETER = "/lib64/ld-linux-x86-64.so.2"


def compile_library(folder: Path, versions: list[str]) -> None:
    """libkitver.so.1 defining one function per version, in a version node each."""
    script, source, previous = [], [], ""
    for index, version in enumerate(versions):
        script.append(f"{version} {{ global: f{index}; {'local: *;' if not index else ''} }}"
                      f"{' ' + previous if previous else ''};")
        source.append(f"int f{index}(void) {{ return {index}; }}")
        previous = version
    (folder / "kitver.map").write_text("\n".join(script) + "\n")
    (folder / "kitver.c").write_text("\n".join(source) + "\n")
    subprocess.run([tool("gcc"), "-shared", "-fPIC", "-Wl,--version-script=kitver.map",
                    "-Wl,-soname,libkitver.so.1", "kitver.c", "-o", "libkitver.so.1"],
                   cwd=folder, check=True)


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kit/bin/needs-v2 (needs KITVER_2 of libkitver.so.1), kit/bin/needs-absent (needs
    libabsent.so.3), kit/lib/libkitver.so.1 that defines KITVER_1 only."""
    root = tmp_path_factory.mktemp("smoke")
    (root / "bin").mkdir()
    (root / "lib").mkdir()
    lib = root / "lib"
    compile_library(lib, ["KITVER_1", "KITVER_2"])
    (lib / "main.c").write_text("int f1(void);\nint main(void) { return f1(); }\n")
    subprocess.run([tool("gcc"), "main.c", "-L.", "-l:libkitver.so.1",
                    "-Wl,-rpath,$ORIGIN/../lib", "-o", str(root / "bin" / "needs-v2")],
                   cwd=lib, check=True)
    compile_library(lib, ["KITVER_1"])  # the kit's copy is older than what the program needs
    (lib / "absent.c").write_text("int g(void) { return 0; }\n")
    subprocess.run([tool("gcc"), "-shared", "-fPIC", "-Wl,-soname,libabsent.so.3", "absent.c",
                    "-o", "libabsent.so.3"], cwd=lib, check=True)
    (lib / "uses.c").write_text("int g(void);\nint main(void) { return g(); }\n")
    subprocess.run([tool("gcc"), "uses.c", "-L.", "-l:libabsent.so.3",
                    "-o", str(root / "bin" / "needs-absent")], cwd=lib, check=True)
    (lib / "libabsent.so.3").unlink()
    return root


def trace(folder: Path) -> str:
    done = subprocess.run(["sh", "-c", trace_script(INTERPRETER, str(folder))],
                          capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def test_every_missing_library_and_version_is_named(kit: Path) -> None:
    verdict = read_trace(trace(kit / "bin"), "this host", strip=f"{kit}/")
    assert verdict.binaries == ("bin/needs-absent", "bin/needs-v2")
    assert not verdict.passed
    named = {str(missing) for missing in verdict.missing}
    assert named == {"bin/needs-absent: libabsent.so.3 not found",
                     "bin/needs-v2: libkitver.so.1 has no KITVER_2"}, named
    assert verdict.summary().startswith("failed in this host: ")


def test_a_kit_that_loads_passes(kit: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "hello.c").write_text("int main(void) { return 0; }\n")
    subprocess.run([tool("gcc"), str(tmp_path / "hello.c"), "-o", str(bin_dir / "hello")],
                   check=True)
    verdict = read_trace(trace(bin_dir), "this host", strip=f"{tmp_path}/")
    assert verdict.passed and verdict.binaries == ("bin/hello",)
    assert verdict.summary() == ("passed in this host: every library and symbol version of 1 "
                                 "binaries resolved")


def test_no_binary_traced_is_not_a_pass() -> None:
    verdict = read_trace("sh: 1: /lib64/ld-linux-x86-64.so.2: not found\n", "an image")
    assert not verdict.passed
    assert verdict.summary() == "failed in an image: no binary was traced"
