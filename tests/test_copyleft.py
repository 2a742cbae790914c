"""The copyleft obligations of a portable kit (pipeline.copyleft): the verdict table, the build's
refusal of a bundled package it does not classify, the fetch of a real Debian source package
checked against the archive, the kit folder's sources/, and the README's words (the record and
the publish's fetch against a served archive: test_sources)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, CheckFailed, ConfigError
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.kit import flavours, kitdir
from ninfer_kits.kit.owed_sources import OwedPackage, OwedSources, SourceFile
from ninfer_kits.matrix import SourcesConfig
from ninfer_kits.pipeline import copyleft
from ninfer_kits.pipeline.provenance import Origin
from ninfer_kits.publish import sources
from ninfer_kits.publish.plan import assets_of
from ninfer_kits.release.checksums import SHA256, read_sha256sums, render_sums
from test_publish_support import make_kit

GPL_SET = ("ffmpeg", "x264", "x265", "xvidcore", "zvbi")


def test_the_shipped_table_classifies_the_example_kit_s_packages() -> None:
    verdicts = copyleft.load_verdicts()
    for name in (*GPL_SET, "gcc-14", "zeromq3", "gnutls28"):
        verdict = verdicts.of("dpkg", name)
        assert verdict is not None and verdict.obligation == copyleft.SOURCE, name
    for name in ("openssl", "libzstd", "libpng1.6", "curl"):  # GPL names in DEP-5, not in the .so
        verdict = verdicts.of("dpkg", name)
        assert verdict is not None and verdict.obligation == copyleft.NOTICE, name
        assert verdict.why or "GPL" not in verdict.licence, name
    wheel = verdicts.of("wheel", "nvidia-cuda-runtime")
    assert wheel is not None and wheel.obligation == copyleft.NOTICE
    assert verdicts.of("wheel", "ffmpeg") is None  # the manager is part of the key


@pytest.mark.parametrize(("text", "key", "says"), [
    ('schema = 1\n[dpkg.ffmpeg]\nlicence = "GPL-2.0-or-later"\nobligation = "maybe"\n',
     "obligation", "'maybe' is not one of 'source', 'notice'"),
    ('schema = 1\n[dpkg.ffmpeg]\nobligation = "source"\n', "licence", "missing required key"),
    ('schema = 1\n[dpkg.ffmpeg]\nlicence = "GPL-2.0-or-later"\nobligation = "source"\nwhy = 3\n',
     "why", "a string"),
    ('schema = 1\n[dpkg.FFmpeg]\nlicence = "GPL-2.0-or-later"\nobligation = "source"\n',
     "FFmpeg", "invalid package name"),
    ('schema = 2\n[dpkg.ffmpeg]\nlicence = "GPL-2.0-or-later"\nobligation = "source"\n', "schema",
     "unsupported schema 2"),
    ('schema = 1\n[rpm.ffmpeg]\nlicence = "GPL-2.0-or-later"\nobligation = "source"\n', "rpm",
     "unknown key"),
    ("schema = 1\n", "dpkg", "no verdicts"),
    ('schema = 1\n[dpkg.ffmpeg]\nlicence = "GPL-2+ or MIT"\nobligation = "source"\n',
     "licence", "not an SPDX licence expression"),
    ('schema = 1\n[wheel.cuda]\nlicence = "LicenseRef-EULA"\nobligation = "notice"\n',
     "licence", "needs a `name`"),
    ('schema = 1\n[wheel.cuda]\nlicence = "MIT"\nname = "x"\nobligation = "notice"\n',
     "name", "only for a LicenseRef"),
])
def test_a_bad_table_is_refused_naming_file_and_key(tmp_path: Path, text: str, key: str,
                                                    says: str) -> None:
    path = tmp_path / "copyleft.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        copyleft.load_verdicts(path)
    message = str(caught.value)
    assert str(path) in message and key in message and says in message, message
    assert caught.value.exit_code == EXIT_BAD_INPUT


def _root(tmp_path: Path, *stanzas: str) -> Path:
    status = tmp_path / "root" / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("\n".join(stanzas))
    return tmp_path / "root"


STATUS = """\
Package: libavcodec61
Status: install ok installed
Architecture: amd64
Source: ffmpeg (7:7.1.5-0+deb13u1)
Version: 7:7.1.5-0+deb13u1

Package: libfoo1
Status: install ok installed
Source: foo
Version: 1.2-3+b1

Package: libx264-164
Status: install ok installed
Source: x264 (2:0.164.3108+git31e19f9-2)
Version: 2:0.164.3108+git31e19f9-2+b1
"""


def _origin(package: str, manager: str = "dpkg") -> Origin:
    return Origin(package, "1", "dpkg" if manager == "dpkg" else "wheel", "MIT", "/x")


def test_a_bundled_package_without_a_verdict_stops_the_build(tmp_path: Path) -> None:
    root = _root(tmp_path, STATUS)
    origins = [_origin("libavcodec61"), _origin("libfoo1"), _origin("some-wheel", "wheel")]
    with pytest.raises(copyleft.Unclassified) as caught:
        copyleft.classify(origins, root, copyleft.load_verdicts())
    message = str(caught.value)
    assert str(copyleft.DATA_FILE) in message
    assert "[dpkg.foo]: Debian source package foo (of libfoo1)" in message
    assert "[wheel.some-wheel]" in message and "ffmpeg" not in message
    # classified, a source version is dpkg's, not the binary's (binNMU +b1)
    done = copyleft.classify([_origin("libavcodec61"), _origin("libx264-164")], root,
                             copyleft.load_verdicts())
    assert [(p.name, p.version, p.stem) for p in done.sources] == [
        ("ffmpeg", "7:7.1.5-0+deb13u1", "ffmpeg_7.1.5-0+deb13u1"),
        ("x264", "2:0.164.3108+git31e19f9-2", "x264_0.164.3108+git31e19f9-2")]


def test_dsc_checksums() -> None:
    dsc = ("Format: 3.0 (quilt)\nSource: x\nChecksums-Sha256:\n"
           f" {'a' * 64} 10 x_1.orig.tar.xz\n {'b' * 64} 2 x_1-1.debian.tar.xz\nFiles:\n"
           f" {'c' * 32} 10 x_1.orig.tar.xz\n")
    assert sources.dsc_checksums(dsc) == {"x_1.orig.tar.xz": "a" * 64,
                                           "x_1-1.debian.tar.xz": "b" * 64}


def test_a_real_source_package_is_fetched_checked_and_cached(roots: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """libmd (a few hundred kB) at the version the trixie root has installed, from
    deb.debian.org, by the record the build makes of that root (its apt sources and keys)."""
    root = roots["trixie"]
    package = copyleft.source_packages(root, {"libmd0"})["libmd"]
    archives, keyrings = copyleft.apt_archives(root)
    record = OwedSources(archives, keyrings, (OwedPackage(package.name, package.version,
                                                          package.binaries, "BSD-3-Clause"),))
    # no snapshot fallback here: snapshot.debian.org is not this test's claim
    config = SourcesConfig(snapshot="https://snapshot.invalid")
    said: list[str] = []
    started = time.monotonic()
    try:
        files = sources.fetch_owed(record, config, tmp_path / "cache", said.append)
    except sources.SourcesUnreachable as error:
        # This project's machines (CI's too) reach Debian through a mirror that serves only
        # part of the source pool: say so and what it answered, rather than fail on it.
        pytest.skip(f"deb.debian.org does not serve this source package here: {error}")
    print(f"\nfetched {package.name} {package.version} in {time.monotonic() - started:.1f} s")
    names = [item.name for item in files]
    assert f"{package.stem}.dsc" in names and any(".orig.tar." in name for name in names)
    dsc = (tmp_path / "cache/sources" / package.stem / f"{package.stem}.dsc").read_text()
    assert {item.name: item.sha256 for item in files if not item.name.endswith(".dsc")} == \
        sources.dsc_checksums(dsc)
    assert said[-1] == f"sources: fetched libmd {package.version}"
    # the cache answers a second time, with no apt-get (it would say "fetching")
    said.clear()
    assert sources.fetch_owed(record, config, tmp_path / "cache", said.append) == files
    assert said == [f"sources: 1 source packages, all in the cache ({tmp_path / 'cache/sources'})"]


def test_a_dsc_that_disagrees_with_its_files_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "x_1"
    folder.mkdir()
    (folder / "x_1.tar.xz").write_bytes(b"x")
    (folder / "x_1.dsc").write_text(f"Checksums-Sha256:\n {'0' * 64} 1 x_1.tar.xz\n")
    expected = {name: (None, hash_file(folder / name).sha256) for name in os.listdir(folder)}
    with pytest.raises(sources.SourceMismatch, match="its Checksums-Sha256 lists") as caught:
        sources.checked(folder, OwedPackage("x", "1", ("x1",), "GPL-2+"), expected)
    assert caught.value.exit_code == EXIT_CHECK_FAILED


def test_the_readme_names_each_owed_package_its_version_and_licence(tmp_path: Path) -> None:
    root = _root(tmp_path, STATUS)
    done = copyleft.classify([_origin("libavcodec61")], root, copyleft.load_verdicts())
    text = copyleft.readme_section(done, "v1")
    assert ("ffmpeg 7:7.1.5-0+deb13u1 (source of libavcodec61)\n"
            "  licence:  GPL-2.0-or-later\n") in text
    assert "same release as\nthis kit (v1)" in text and "Written statement" in text
    assert "SHA256SUMS lists each file with its sha256" in text  # not known at build any more
    assert copyleft.readme_section(copyleft.Obligations((), ()), "v1") == ""


def test_a_kit_folder_carries_its_sources_listed_and_checked(program: Path,
                                                             tmp_path: Path) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True)
    sources = kit.path / kitdir.SOURCES
    sources.mkdir()
    (sources / "x_1-1.dsc").write_text("a source package\n")
    sums = read_sha256sums(kit.path / kitdir.SHA256SUMS)
    sums["sources/x_1-1.dsc"] = "0" * 64
    (kit.path / kitdir.SHA256SUMS).write_text(render_sums(sums, SHA256))
    with pytest.raises(kitdir.KitDirInvalid, match=r"sources/x_1-1\.dsc does not match"):
        kitdir.read_kit_dir(kit.path)
    sums["sources/x_1-1.dsc"] = hash_file(sources / "x_1-1.dsc").sha256
    (kit.path / kitdir.SHA256SUMS).write_text(render_sums(sums, SHA256))
    read = kitdir.read_kit_dir(kit.path, built=True)
    assert read.sources == ("sources/x_1-1.dsc",) and kitdir.SOURCES not in read.files
    (sources / "unlisted.tar.xz").write_text("x")
    with pytest.raises(kitdir.KitDirInvalid, match=r"SHA256SUMS lists sources/x_1-1\.dsc"):
        kitdir.read_kit_dir(kit.path)
    (sources / "unlisted.tar.xz").unlink()
    # publish uploads it by its own name: a release's assets are flat
    assets = {asset.name: asset for asset in assets_of(kitdir.read_kit_dir(kit.path))}
    assert assets["x_1-1.dsc"].sha256 == sums["sources/x_1-1.dsc"]
    assert list(assets)[-1] == kitdir.SHA256SUMS
    # a release holds it flat beside the kit (checked), or not at all (a fetch's DEST)
    (sources / "x_1-1.dsc").rename(kit.path / "x_1-1.dsc")
    sources.rmdir()
    (kit.path / kitdir.BUILD_LOG).unlink()
    assert kitdir.read_kit_dir(kit.path).sources == ("sources/x_1-1.dsc",)
    (kit.path / "x_1-1.dsc").write_text("swapped\n")
    with pytest.raises(kitdir.KitDirInvalid, match=r"x_1-1\.dsc does not match"):
        kitdir.read_kit_dir(kit.path)
    (kit.path / "x_1-1.dsc").unlink()
    assert kitdir.read_kit_dir(kit.path).sources == ("sources/x_1-1.dsc",)
    # an orig tarball may end in .tar.gz: a source file, not a third kit tarball
    (kit.path / "y_1.orig.tar.gz").write_bytes(b"y")
    sums["sources/y_1.orig.tar.gz"] = hash_file(kit.path / "y_1.orig.tar.gz").sha256
    (kit.path / kitdir.SHA256SUMS).write_text(render_sums(sums, SHA256))
    assert kitdir.read_kit_dir(kit.path).tarballs == (kit.asset, flavours.PORTABLE.asset(kit.asset))


def test_the_build_places_the_sources_beside_the_kit_rechecked(tmp_path: Path) -> None:
    from ninfer_kits.pipeline.stage_functions import place_sources

    cached = tmp_path / "cache"
    cached.mkdir()
    (cached / "x_1.dsc").write_text("dsc\n")
    item = SourceFile("x", "1", "x_1.dsc", cached / "x_1.dsc", 4,
                               hash_file(cached / "x_1.dsc").sha256)
    staging = tmp_path / "staging"
    staging.mkdir()
    assert place_sources(staging, [item, item]) == {"sources/x_1.dsc": item.sha256}
    assert (staging / "sources/x_1.dsc").read_text() == "dsc\n"
    assert (staging / "sources/x_1.dsc").stat().st_mode & 0o777 == 0o644
    shutil.rmtree(staging / "sources")
    (cached / "x_1.dsc").write_text("changed in the cache since it was checked\n")
    with pytest.raises(CheckFailed, match="was checked as"):
        place_sources(staging, [item])
