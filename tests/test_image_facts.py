"""What a toolchain image says of itself (pipeline/image_facts.py, /etc/ninfer-kits/toolchain.toml)
and what reads it: the repair resolves in the image's library_path first, provenance names a
file under a package root by that root's own dpkg records and a file the image built by its
record, and copyleft classifies and ships what the image built. Roots are folders made here,
as an exported image is, with real libraries compiled here."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from ninfer_kits.errors import ConfigError
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.pipeline.copyleft import (
    SOURCE,
    SourceUnavailable,
    Unclassified,
    built_sources,
    classify,
    load_verdicts,
    readme_section,
)
from ninfer_kits.pipeline.image_facts import NO_FACTS, read_image_facts
from ninfer_kits.pipeline.portable_policy import load_policy
from ninfer_kits.pipeline.provenance import LicenseUnknown, Origin, PackageIndex
from ninfer_kits.pipeline.repair import LibraryEnvironment, repair
from test_repair import DEP5, _debian_root, _kit_with, _library

SYSROOT = "/opt/sysroot"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _facts(root: Path, text: str) -> Path:
    path = root / "etc/ninfer-kits/toolchain.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _record(root: Path, name: str, files: dict[str, str], licence: str = "LGPL-2.1-or-later"
            ) -> None:
    """A built library's record, its licence file, tarball and scripts, in root."""
    for path, text in {f"/opt/ninfer-kits/sources/{name}.tar.xz": "tarball",
                       "/opt/ninfer-kits/build/common.sh": "common",
                       f"/opt/ninfer-kits/build/{name}.sh": "script",
                       f"/opt/doc/{name}/COPYING": "GNU LESSER GENERAL PUBLIC LICENSE"}.items():
        (root / path[1:]).parent.mkdir(parents=True, exist_ok=True)
        (root / path[1:]).write_text(text)
    listed = "\n".join(f'"{path}" = "{digest}"' for path, digest in files.items())
    tarball = _sha256(root / f"opt/ninfer-kits/sources/{name}.tar.xz")
    record = root / "opt/ninfer-kits/built" / f"{name}.toml"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(f"""schema = 1
name = "{name}"
version = "7.1.5"
licence = "{licence}"
source = "/opt/ninfer-kits/sources/{name}.tar.xz"
source_sha256 = "{tarball}"
build_files = ["/opt/ninfer-kits/build/common.sh", "/opt/ninfer-kits/build/{name}.sh"]
licence_files = ["/opt/doc/{name}/COPYING"]

[files]
{listed}
""")


def _sysroot_root(tmp_path: Path) -> Path:
    """A Debian root (the image) whose /opt/sysroot is a Debian root of its own: both have a
    libkitdemo.so.1 of package libkitdemo1, each with its dpkg records."""
    root = _debian_root(tmp_path / "image", DEP5)
    inner = _debian_root(tmp_path / "inner", DEP5.replace("2025 Someone\n", "2021 Old\n", 1))
    shutil.move(inner, root / SYSROOT.lstrip("/"))
    return root


def test_an_ordinary_image_states_nothing(tmp_path: Path) -> None:
    assert read_image_facts(tmp_path) is NO_FACTS


def test_the_facts_and_records_are_read_and_checked(tmp_path: Path) -> None:
    lib = _library(tmp_path / "opt/sysroot/usr/local/lib", "libav.so.61")
    _record(tmp_path, "ffmpeg", {"/opt/sysroot/usr/local/lib/libav.so.61": _sha256(lib)})
    _facts(tmp_path, 'schema = 1\nlibrary_path = ["/opt/sysroot/usr/local/lib"]\n'
                     'package_roots = ["/opt/sysroot"]\nbuilt = "/opt/ninfer-kits/built"\n')
    facts = read_image_facts(tmp_path)
    assert facts.library_path == ("/opt/sysroot/usr/local/lib",)
    assert facts.package_roots == ("/opt/sysroot",)
    (built,) = facts.built
    assert (built.name, built.version, built.record) == \
        ("ffmpeg", "7.1.5", "/opt/ninfer-kits/built/ffmpeg.toml")
    assert built.files == {"/opt/sysroot/usr/local/lib/libav.so.61": _sha256(lib)}


@pytest.mark.parametrize(("text", "said"), [
    ('schema = 1\nlibrary_path = ["lib"]\n', "key 'library_path': 'lib' is not an absolute"),
    ('schema = 1\nlibrary_paths = ["/lib"]\n', "library_paths"),
    ('schema = 2\n', "unsupported schema 2"),
    ('schema = 1\npackage_roots = "/opt/sysroot"\n', "key 'package_roots'"),
])
def test_a_wrong_facts_file_is_named(tmp_path: Path, text: str, said: str) -> None:
    path = _facts(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_image_facts(tmp_path)
    assert str(path) in str(caught.value) and said in str(caught.value)


def test_a_record_without_the_sha256_of_a_file_is_named(tmp_path: Path) -> None:
    _record(tmp_path, "curl", {"/opt/x/libcurl.so.4": "not-a-digest"})
    _facts(tmp_path, 'schema = 1\nbuilt = "/opt/ninfer-kits/built"\n')
    with pytest.raises(ConfigError, match=r"curl\.toml.*\[files\].*/opt/x/libcurl\.so\.4"):
        read_image_facts(tmp_path)


def test_a_file_the_image_built_is_named_by_its_record(tmp_path: Path) -> None:
    lib = _library(tmp_path / "opt/sysroot/usr/local/lib", "libav.so.61")
    _record(tmp_path, "ffmpeg", {"/opt/sysroot/usr/local/lib/libav.so.61": _sha256(lib)})
    _facts(tmp_path, 'schema = 1\nbuilt = "/opt/ninfer-kits/built"\n')
    index = PackageIndex(RootFS(tmp_path), read_image_facts(tmp_path))
    # reached through the link beside it, as the loader reaches it
    origin = index.origin("/opt/sysroot/usr/local/lib/libav.so")
    assert origin == Origin("ffmpeg", "7.1.5", "built", "LGPL-2.1-or-later",
                            "/opt/doc/ffmpeg/COPYING")
    lib.write_bytes(lib.read_bytes() + b"\0")
    with pytest.raises(LicenseUnknown, match=r"differs from the file ffmpeg 7\.1\.5 installed "
                                             r"\(/opt/ninfer-kits/built/ffmpeg\.toml"):
        PackageIndex(RootFS(tmp_path), read_image_facts(tmp_path)).origin(str(lib)[len(
            str(tmp_path)):])


def test_a_file_under_a_package_root_is_named_by_that_roots_records(tmp_path: Path) -> None:
    root = _sysroot_root(tmp_path)
    _facts(root, f'schema = 1\npackage_roots = ["{SYSROOT}"]\n')
    index = PackageIndex(RootFS(root), read_image_facts(root))
    inner = index.origin(f"{SYSROOT}/usr/lib/x86_64-linux-gnu/libkitdemo.so.1")
    assert (inner.package, inner.version, inner.root) == ("libkitdemo1", "1.2-3", SYSROOT)
    assert inner.license_file == f"{SYSROOT}/usr/share/doc/libkitdemo1/copyright"
    assert "2021 Old" in (root / inner.license_file[1:]).read_text()
    own = index.origin("/usr/lib/x86_64-linux-gnu/libkitdemo.so.1")
    assert (own.root, own.license_file) == ("/", "/usr/share/doc/libkitdemo1/copyright")


def test_the_repair_takes_the_library_path_first(tmp_path: Path) -> None:
    root = _sysroot_root(tmp_path)
    inner = f"{SYSROOT}/usr/lib/x86_64-linux-gnu"
    # without facts: the image's own library, as its loader finds it
    kit = _kit_with(tmp_path / "a", "-L", root / "usr/lib/x86_64-linux-gnu", "-lkitdemo")
    (plain,) = repair(kit, LibraryEnvironment.exported(root), load_policy(),
                      lambda _: None).bundled
    assert plain.source_path == "/usr/lib/x86_64-linux-gnu/libkitdemo.so.1"
    _facts(root, f'schema = 1\nlibrary_path = ["{inner}"]\npackage_roots = ["{SYSROOT}"]\n')
    said: list[str] = []
    kit = _kit_with(tmp_path / "b", "-L", root / "usr/lib/x86_64-linux-gnu", "-lkitdemo")
    (item,) = repair(kit, LibraryEnvironment.exported(root), load_policy(), said.append).bundled
    assert item.source_path == f"{inner}/libkitdemo.so.1"
    assert (item.origin.root, item.origin.package) == (SYSROOT, "libkitdemo1")
    assert "2021 Old" in (kit / "third_party/libkitdemo1/copyright").read_text()
    assert any(f"its {inner} first" in line for line in said), said


def test_built_libraries_are_classified_and_their_source_shipped(tmp_path: Path) -> None:
    lib = _library(tmp_path / "opt/sysroot/usr/local/lib", "libav.so.61")
    _record(tmp_path, "ffmpeg", {"/opt/sysroot/usr/local/lib/libav.so.61": _sha256(lib)})
    _facts(tmp_path, 'schema = 1\nbuilt = "/opt/ninfer-kits/built"\n')
    facts = read_image_facts(tmp_path)
    origin = PackageIndex(RootFS(tmp_path), facts).origin("/opt/sysroot/usr/local/lib/libav.so.61")
    obligations = classify([origin], tmp_path, load_verdicts())
    ((name, verdict),) = obligations.verdicts
    assert (name, verdict.manager, verdict.obligation) == ("ffmpeg", "built", SOURCE)
    assert obligations.built == (("ffmpeg", "7.1.5"),) and obligations.sources == ()
    files = built_sources(obligations.built, facts, tmp_path, tmp_path / "cache")
    assert sorted(f.name for f in files) == ["ffmpeg.tar.xz", "ffmpeg_7.1.5-common.sh",
                                             "ffmpeg_7.1.5-ffmpeg.sh"]
    assert all(f.path.parent == tmp_path / "cache/sources/ffmpeg_7.1.5" for f in files)
    assert all(f.sha256 == _sha256(f.path) for f in files)
    readme = readme_section(obligations, "v1")
    assert "ffmpeg 7.1.5 (built in the toolchain image)\n  licence:  LGPL-2.1-or-later\n" \
        in readme
    assert "sha256:" not in readme  # the release's SHA256SUMS lists each file it carries
    # a tarball that is not the one the record names is never shipped
    (tmp_path / "opt/ninfer-kits/sources/ffmpeg.tar.xz").write_text("another")
    with pytest.raises(SourceUnavailable, match=r"ffmpeg\.tar\.xz in the toolchain image"):
        built_sources(obligations.built, facts, tmp_path, tmp_path / "cache2")
    unknown = Origin("libfoo", "1", "built", "MIT", "/opt/doc/COPYING")
    with pytest.raises(Unclassified, match=r"\[built\.libfoo\]: libfoo, built in the toolchain"):
        classify([unknown], tmp_path, load_verdicts())
