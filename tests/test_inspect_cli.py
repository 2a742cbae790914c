"""`ninfer-kits inspect` on files, folders and kit tarballs, and its errors, as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest


def inspect(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", *map(str, args)],
                          capture_output=True, text=True, check=False)


@pytest.fixture()
def kit_folder(tmp_path: Path, c_binaries: dict[str, Path], cuda_binaries: dict[str, Path]) -> Path:
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    (kit / "lib").mkdir()
    (kit / "bin" / "ninfer").write_bytes(cuda_binaries["shared_cudart"].read_bytes())
    (kit / "bin" / "ninfer-serve").write_bytes(c_binaries["runpath"].read_bytes())
    (kit / "lib" / "libkitdemo.so.1").write_bytes(c_binaries["kitlib"].read_bytes())
    (kit / "BUILDINFO.txt").write_text("upstream: example\n")
    return kit


def test_folder_lists_every_elf_and_one_floor(kit_folder: Path) -> None:
    done = inspect(kit_folder)
    assert done.returncode == 0, done.stderr
    for name in ("bin/ninfer:", "bin/ninfer-serve:", "lib/libkitdemo.so.1:"):
        assert name in done.stdout
    assert "BUILDINFO" not in done.stdout
    assert "Runtime floor of" in done.stdout and "(3 ELF files)" in done.stdout
    row = r"\| CUDA 13 runtime — libcudart.so.13 +\| RUNPATH is /usr/local/cuda/lib64 \|"
    assert re.search(row, done.stdout)


def test_tarball_is_read_without_unpacking_next_to_it(kit_folder: Path, tmp_path: Path) -> None:
    tarball = tmp_path / "kit.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(kit_folder, arcname="kit")
    before = sorted(tmp_path.iterdir())
    done = inspect("--json", tarball)
    assert done.returncode == 0, done.stderr
    assert sorted(tmp_path.iterdir()) == before
    report = json.loads(done.stdout)
    assert report["schema_version"] == 3
    assert [f["path"] for f in report["files"]] == [
        "kit/bin/ninfer", "kit/bin/ninfer-serve", "kit/lib/libkitdemo.so.1"]
    floor = report["floor"]
    assert floor["provided_in_kit"] == ["libkitdemo.so.1"]
    assert "libkitdemo.so.1" not in floor["sonames"]
    assert floor["cuda"] == {"sass": ["sm_86"], "ptx": [], "relocatable": [], "other": [],
                             "embedded": [], "embedded_in": []}
    assert floor["symbol_versions"]["GLIBC"]["floor"]
    assert report["files"][0]["cuda"][0] == {
        "section": ".nv_fatbin", "segment": None, "placement": "fatbin", "loadable": True,
        "kind": "sass", "arch": "sm_86",
        "compressed": False, "payload_size": report["files"][0]["cuda"][0]["payload_size"]}


def test_json_matches_text_floor(kit_folder: Path) -> None:
    report = json.loads(inspect("--json", kit_folder).stdout)
    text = inspect("--floor-only", kit_folder).stdout
    for row in report["floor"]["table"]:
        assert row["requirement"] in text and row["why"] in text


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "no such file or folder"),
        (lambda d: _write(d / "notes.txt", b"hello, not an ELF\n"), "not an ELF file"),
        (lambda d: _write(d / "short", b"\x7fELF\x02\x01"), "corrupt or truncated ELF file"),
        (lambda d: _write(d / "empty-folder/README", b"text"), "holds no ELF file"),
        (lambda d: _tar(d / "docs.tar.gz", {"kit/README": b"text"}), "holds no ELF file"),
        (lambda d: _write(d / "broken.tar.gz", b"\x1f\x8b\x08\x00garbage"), "not a readable"),
    ],
    ids=["missing", "not-elf", "truncated", "empty-folder", "tar-without-elf", "corrupt-tar"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    if target.name == "README":
        target = target.parent
    done = inspect(target)
    assert done.returncode == 2
    assert message in done.stderr and str(target) in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_corrupt_headers_exit_2(c_binaries: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(c_binaries["glibc234"].read_bytes())
    data[0x28:0x30] = b"\xff" * 8  # e_shoff far past the end of the file
    target = _write(tmp_path / "bad-shoff", bytes(data))
    done = inspect(target)
    assert done.returncode == 2 and "corrupt or truncated ELF file" in done.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    target = _write(tmp_path / "short", b"\x7fELF\x02\x01")
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "--debug", "inspect", str(target)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "Traceback" in done.stderr


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    import io

    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_json_follows_its_published_schema(kit_folder: Path, c_binaries: dict[str, Path],
                                           cuda_binaries: dict[str, Path]) -> None:
    import jsonschema

    schema_path = Path(__file__).parent.parent / "src/ninfer_kits/data/inspect.schema.json"
    schema = json.loads(schema_path.read_text())
    for target in (kit_folder, cuda_binaries["rdc.o"], c_binaries["recent_cxx"]):
        jsonschema.validate(json.loads(inspect("--json", target).stdout), schema)
    broken = json.loads(inspect("--json", kit_folder).stdout)
    broken["files"][0]["cuda"][0]["arch"] = "sm86"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
