"""The kit folder contract (kitdir) with a portable sibling: read, listed and verified, and every
way the pair can be wrong. Kit folders are made as the build makes them (test_publish_support's
make_kit), without a compile; test_build.py checks folders of real builds."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_CHECK_FAILED
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.kit import buildinfo, flavours, kitdir
from ninfer_kits.kit.kitdir import KitDirInvalid
from ninfer_kits.release.checksums import SHA1, render_sums
from ninfer_kits.verify.kit import open_kit
from test_publish_support import ASSET, PORTABLE, TAG, make_kit


@pytest.fixture(scope="module")
def pair(program: Path, tmp_path_factory: pytest.TempPathFactory) -> kitdir.KitDir:
    """dist/<tag>/ with the plain kit and its portable sibling (read-only: copy to change)."""
    return make_kit(tmp_path_factory.mktemp("pair") / "dist", program, portable=True)


@pytest.fixture(scope="module")
def plain(program: Path, tmp_path_factory: pytest.TempPathFactory) -> kitdir.KitDir:
    return make_kit(tmp_path_factory.mktemp("plain") / "dist", program)


def copy(kit: kitdir.KitDir, tmp_path: Path) -> Path:
    folder = tmp_path / TAG
    shutil.copytree(kit.path, folder)
    return folder


def test_portable_name() -> None:
    assert flavours.PORTABLE.asset(ASSET) == PORTABLE
    assert flavours.PORTABLE.asset("k.tar.gz") == "k-portable.tar.gz"
    for wrong in ("k.tgz", ".tar.gz", "k.tar"):
        with pytest.raises(ValueError, match="not a kit tarball's name"):
            flavours.PORTABLE.asset(wrong)
    assert render_sums({"b": "2" * 40, "a": "1" * 40}, SHA1) == \
        f"{'1' * 40}  a\n{'2' * 40}  b\n"


def test_a_folder_with_a_portable_sibling_reads_lists_and_verifies_both(
        pair: kitdir.KitDir) -> None:
    kit = kitdir.read_kit_dir(pair.path)
    assert (kit.asset, kit.verified, kit.tag) == (ASSET, True, TAG)
    assert kit.portable is not None
    assert (kit.portable.asset, kit.portable.folder) == (PORTABLE, pair.path)
    assert kit.portable.path == pair.path / PORTABLE
    assert kit.tarballs == (ASSET, PORTABLE)
    assert kit.files == tuple(sorted(p.name for p in pair.path.iterdir()))
    assert set(kit.files) == {ASSET, PORTABLE, "BUILDINFO.txt", "SHA256SUMS", "SHA1SUMS",
                              "build.log"}
    for name, size, sha256, sha1 in ((ASSET, kit.size, kit.sha256, kit.sha1),
                                     (PORTABLE, kit.portable.size, kit.portable.sha256,
                                      kit.portable.sha1)):
        hashed = hash_file(pair.path / name)
        assert (size, sha256, sha1) == (hashed.size, hashed.sha256, hashed.sha1), name
    assert kit.info.asset_of("portable") == PORTABLE and kit.info.flavour == "plain"
    # SHA1SUMS: one line per tarball, sorted by name (the portable one sorts first)
    assert (pair.path / "SHA1SUMS").read_text() == (
        f"{kit.portable.sha1}  {PORTABLE}\n{kit.sha1}  {ASSET}\n")
    for tool in ("sha256sum", "sha1sum"):
        sums = "SHA256SUMS" if tool == "sha256sum" else "SHA1SUMS"
        checked = subprocess.run([tool, "-c", sums], cwd=pair.path, capture_output=True,
                                 text=True, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    # install put it in place: the sibling's folder is the final one, not the staging one
    assert pair.portable is not None and pair.portable.path == pair.path / PORTABLE


def test_a_plain_kit_has_no_portable(plain: kitdir.KitDir) -> None:
    kit = kitdir.read_kit_dir(plain.path)
    assert kit.portable is None and kit.tarballs == (ASSET,)
    assert kit.info.asset_of("portable") is None and PORTABLE not in kit.files


def test_the_portable_tarball_inside_is_its_own_flavour(pair: kitdir.KitDir,
                                                        tmp_path: Path) -> None:
    import tarfile

    with tarfile.open(pair.path / PORTABLE) as archive:
        names = archive.getnames()
        inner = archive.extractfile("kit/BUILDINFO.txt")
        assert inner is not None
        info = buildinfo.parse(inner.read().decode())
    assert "kit/lib/libbundled.so.1" in names
    assert "kit/third_party/libbundled1/copyright" in names
    assert info.flavour == "portable" and info.asset_of("portable") is None
    assert [row[0] for row in info.bundled] == ["libbundled.so.1"]
    with tarfile.open(pair.path / ASSET) as archive:
        inner = archive.extractfile("kit/BUILDINFO.txt")
        assert inner is not None
        assert buildinfo.parse(inner.read().decode()).asset_of("portable") == PORTABLE


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def _flip_last_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


Damage = Callable[[Path], None]
DAMAGES: list[tuple[str, Damage, str]] = [
    ("portable-bytes", lambda d: _flip_last_byte(d / PORTABLE),
     f"{PORTABLE} does not match SHA256SUMS"),
    ("portable-sha1", lambda d: _rewrite(
        d / "SHA1SUMS", (d / "SHA1SUMS").read_text()[:40], "0" * 40),
     f"{PORTABLE} does not match SHA1SUMS"),
    ("portable-sha256", lambda d: _rewrite(
        d / "SHA256SUMS", hash_file(d / PORTABLE).sha256, "0" * 64),
     f"{PORTABLE} does not match SHA256SUMS"),
    ("sha1-one-line", lambda d: (d / "SHA1SUMS").write_text(
        (d / "SHA1SUMS").read_text().splitlines(keepends=True)[1]),
     f"expected 2 lines '<sha1>  {PORTABLE}', '<sha1>  {ASSET}'"),
    ("sha1-unsorted", lambda d: (d / "SHA1SUMS").write_text(
        "".join(reversed((d / "SHA1SUMS").read_text().splitlines(keepends=True)))),
     "expected 2 lines"),
    ("sums-without-portable", lambda d: (d / "SHA256SUMS").write_text(
        "".join(line for line in (d / "SHA256SUMS").read_text().splitlines(keepends=True)
                if PORTABLE not in line)),
     f"SHA256SUMS lists BUILDINFO.txt, {ASSET}; it must list exactly BUILDINFO.txt, "
     f"{PORTABLE}, {ASSET}"),
    ("unpaired-third", lambda d: (d / "other.tar.gz").write_bytes(b""),
     "holds 3 tarballs"),
    ("portable-gone", lambda d: (d / PORTABLE).unlink(),
     f"BUILDINFO.txt names portable_asset {PORTABLE}, but the folder holds no portable "
     f"tarball"),
    ("buildinfo-names-none", lambda d: _rewrite(
        d / "BUILDINFO.txt", f"portable_asset: {PORTABLE}", "portable_asset: none"),
     f"BUILDINFO.txt names portable_asset none, but the folder holds {PORTABLE}"),
    ("buildinfo-names-another", lambda d: _rewrite(
        d / "BUILDINFO.txt", f"portable_asset: {PORTABLE}", "portable_asset: x-portable.tar.gz"),
     f"names portable_asset x-portable.tar.gz, but the folder holds {PORTABLE}"),
    ("buildinfo-says-portable", lambda d: _rewrite(
        d / "BUILDINFO.txt", "format: 1\n", "format: 1\nflavour: portable\n"),
     "BUILDINFO.txt says flavour 'portable'; the one beside the tarballs is the plain kit's"),
]


@pytest.mark.parametrize(("damage", "message"), [(d, m) for _, d, m in DAMAGES],
                         ids=[name for name, _, _ in DAMAGES])
def test_a_damaged_pair_is_refused_naming_what_is_wrong(
        pair: kitdir.KitDir, tmp_path: Path, damage: Damage, message: str) -> None:
    folder = copy(pair, tmp_path)
    damage(folder)
    with pytest.raises(KitDirInvalid, match=re.escape(message)) as caught:
        kitdir.read_kit_dir(folder)
    assert str(folder) in str(caught.value) and caught.value.exit_code == EXIT_CHECK_FAILED


def test_without_verify_a_wrong_portable_hash_is_not_read(pair: kitdir.KitDir,
                                                          tmp_path: Path) -> None:
    folder = copy(pair, tmp_path)
    _flip_last_byte(folder / PORTABLE)
    unchecked = kitdir.read_kit_dir(folder, verify=False)
    assert unchecked.portable is not None and not unchecked.verified


@pytest.mark.parametrize("second", [
    "other.tar.gz",  # not a sibling of anything
    f"x{PORTABLE}",  # a -portable name, of another stem
    ASSET.replace(".tar.gz", "-Portable.tar.gz"),
])
def test_a_second_tarball_that_is_not_the_portable_sibling_is_refused(
        plain: kitdir.KitDir, tmp_path: Path, second: str) -> None:
    folder = copy(plain, tmp_path)
    (folder / second).write_bytes(b"")
    with pytest.raises(KitDirInvalid, match=re.escape(
            f"holds 2 tarballs ({', '.join(sorted((ASSET, second)))}) that are not a pair")):
        kitdir.read_kit_dir(folder)


def test_a_lone_portable_named_tarball_is_the_plain_kit_and_no_pair(
        plain: kitdir.KitDir, tmp_path: Path) -> None:
    """Pairing decides: a folder whose only tarball ends in -portable.tar.gz holds a plain kit
    of that name, which must name no portable sibling."""
    folder = copy(plain, tmp_path)
    (folder / ASSET).rename(folder / PORTABLE)
    for name in ("SHA256SUMS", "SHA1SUMS"):
        _rewrite(folder / name, ASSET, PORTABLE)
    kit = kitdir.read_kit_dir(folder)
    assert (kit.asset, kit.portable) == (PORTABLE, None)


def test_verify_reads_a_finished_folder_with_its_portable_sibling(pair: kitdir.KitDir) -> None:
    with open_kit(pair.path) as kit:
        # the files SHA256SUMS lists (both tarballs and BUILDINFO.txt), not the folder's six
        # build's own folder is no release: no signature is asked of it
        assert kit.checked == ("SHA256SUMS ok (3 files); unsigned: a kit folder as build made "
                               "it (build.log beside it), not a release (only publish signs)")
        assert len((pair.path / "SHA256SUMS").read_text().splitlines()) == 3
        assert kit.info is not None and kit.info.flavour == "plain"
