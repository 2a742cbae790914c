"""A published or downloaded release is a kit: `publish --to local`'s folder, a release's assets
downloaded into one folder, `fetch`'s DEST, and a tarball beside its SHA256SUMS. verify, floor,
inspect and diff (what `repro --against` runs) read each as the kit it is, checking SHA256SUMS
(and SHA1SUMS) wherever there is one. The kits are real (pack, checksums, kitdir.install, a
compiled program), published and fetched by the real commands."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_CHECK_FAILED
from ninfer_kits.kit import flavours, kitdir
from ninfer_kits.kit.kitdir import KitDirInvalid
from ninfer_kits.repro.diff import compare
from ninfer_kits.verify.kit import open_kit
from test_publish_support import ASSET, PORTABLE, TAG, cli, compile_program, make_kit, matrix_file
from unsigned import unsigned_env, unsigned_matrix

NOTES = "RELEASE.md"
PYZ = "ninfer-kits.pyz"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> kitdir.KitDir:
    """dist/<tag>/ as `build` makes it, with a portable sibling (read-only: copy to change)."""
    place = tmp_path_factory.mktemp("built")
    return make_kit(place / "dist", compile_program(place), portable=True)


@pytest.fixture(scope="module")
def published(built: kitdir.KitDir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<out>/<tag>/ of `ninfer-kits publish DIST --to local` (read-only: copy to change)."""
    place = tmp_path_factory.mktemp("published")
    done = cli("publish", built.path, "--to", "local", "--out", place / "out", "--matrix",
               matrix_file(place, portable=True), "--cache-dir", place / "cache")
    assert done.returncode == 0, done.stderr
    folder = place / "out" / TAG
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        (ASSET, PORTABLE, "BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", NOTES, PYZ))
    return folder


@pytest.fixture(scope="module")
def downloaded(published: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every asset of the release downloaded into one folder (a GitHub release has no
    RELEASE.md: its notes are the release's body)."""
    folder = tmp_path_factory.mktemp("downloaded") / "assets"
    folder.mkdir()
    for path in published.iterdir():
        if path.name != NOTES:
            shutil.copy2(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def fetched(published: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ninfer-kits fetch TAG --from <out>`'s DEST: kit/, the plain tarball, SHA256SUMS (which
    lists the portable tarball too), SHA1SUMS and BUILDINFO.txt."""
    dest = tmp_path_factory.mktemp("fetched") / "box"
    done = cli("fetch", TAG, "--from", published.parent, "--dest", dest, "--matrix",
               unsigned_matrix())
    assert done.returncode in (0, 4), done.stderr  # verify's verdict: no NVIDIA driver here
    assert "checked   SHA256SUMS ok, SHA1SUMS ok" in done.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        (ASSET, "BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", "kit"))
    return dest


def copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / folder.name
    shutil.copytree(folder, target, symlinks=True)
    return target


def flip_last_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


# --------------------------------------------------------------------------- kitdir


def test_a_published_folder_reads_as_a_release_of_the_kit(published: Path,
                                                          built: kitdir.KitDir) -> None:
    kit = kitdir.read_kit_dir(published)
    assert kit.verified and (kit.asset, kit.sha256, kit.sha1) == (built.asset, built.sha256,
                                                                  built.sha1)
    assert kit.portable is not None and built.portable is not None
    assert kit.portable.sha256 == built.portable.sha256
    assert kit.files == tuple(sorted((ASSET, PORTABLE, "BUILDINFO.txt", "SHA1SUMS",
                                      "SHA256SUMS")))
    assert kit.extras == (NOTES, PYZ) and not kit.has_build_log
    # only what needs the log says it is missing, and only when asked for it
    with pytest.raises(KitDirInvalid, match=r"no build\.log \(a published or downloaded"):
        _ = kit.build_log
    assert built.build_log.is_file()
    # what install takes is exactly what build makes
    with pytest.raises(KitDirInvalid, match=r"build\.log missing"):
        kitdir.read_kit_dir(published, built=True)


def test_a_release_without_sha1sums_or_one_of_two_tarballs_still_reads(
        downloaded: Path, tmp_path: Path) -> None:
    """The release notes download the tarball, SHA256SUMS and BUILDINFO.txt, and check with
    `sha256sum -c --ignore-missing` when there is a portable sibling."""
    folder = copy(downloaded, tmp_path)
    for name in (PORTABLE, "SHA1SUMS", PYZ):
        (folder / name).unlink()
    kit = kitdir.read_kit_dir(folder)
    assert kit.verified and kit.sha1 is None and kit.portable is None
    assert next(name for name in kit.absent if name.endswith(flavours.PORTABLE.suffix)) == PORTABLE
    flip_last_byte(folder / ASSET)
    with pytest.raises(KitDirInvalid, match=re.escape(f"{ASSET} does not match SHA256SUMS")):
        kitdir.read_kit_dir(folder)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: (d / "notes.txt").write_text("mine\n"),
     "holds notes.txt, which is not part of a kit folder"),
    (lambda d: flip_last_byte(d / PORTABLE), f"{PORTABLE} does not match SHA256SUMS"),
    # SHA256SUMS lists SHA1SUMS and the pyz (what README's first command runs) too
    (lambda d: (d / "SHA1SUMS").write_text((d / "SHA1SUMS").read_text().replace(
        (d / "SHA1SUMS").read_text()[:40], "0" * 40)), "SHA1SUMS does not match SHA256SUMS"),
    (lambda d: flip_last_byte(d / PYZ), f"{PYZ} does not match SHA256SUMS"),
    (lambda d: (d / "SHA256SUMS").unlink(), "SHA256SUMS missing"),
    (lambda d: (d / "BUILDINFO.txt").unlink(), "BUILDINFO.txt missing"),
    (lambda d: ((d / "kit").unlink() if (d / "kit").exists() else None,
                (d / "kit").write_text("")), "kit is not a folder"),
], ids=["stray-file", "tampered-portable", "tampered-sha1", "tampered-pyz", "no-sha256sums",
        "no-buildinfo", "kit-not-a-folder"])
def test_a_damaged_release_folder_is_refused_naming_what(downloaded: Path, tmp_path: Path,
                                                         damage: object, message: str) -> None:
    folder = copy(downloaded, tmp_path)
    damage(folder)  # type: ignore[operator]
    with pytest.raises(KitDirInvalid, match=re.escape(message)) as caught:
        kitdir.read_kit_dir(folder)
    assert caught.value.exit_code == EXIT_CHECK_FAILED


def test_a_build_folder_without_its_portable_tarball_is_still_refused(
        built: kitdir.KitDir, tmp_path: Path) -> None:
    """build writes both tarballs: only a release (no build.log) may hold one of them."""
    folder = copy(built.path, tmp_path)
    (folder / PORTABLE).unlink()
    with pytest.raises(KitDirInvalid, match=r"names portable_asset .* holds no portable"):
        kitdir.read_kit_dir(folder)


# --------------------------------------------------------------------------- verify and floor

UNSIGNED = "; unsigned (no SHA256SUMS.sig)"  # a release made without [publish.signing]


@pytest.mark.parametrize("which", ["published", "downloaded"])
def test_verify_and_floor_check_a_release_folder(which: str,
                                                 request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(which)
    listed = len((folder / "SHA256SUMS").read_text().splitlines())  # what it counts: no extras
    with open_kit(folder) as kit:
        assert kit.checked == f"SHA256SUMS ok ({listed} files){UNSIGNED}"
        assert kit.info is not None and kit.info.flavour == "plain"
    floor = cli("floor", folder, "--json", env=unsigned_env())
    assert floor.returncode == 0, floor.stderr
    assert json.loads(floor.stdout)["checked"] == f"SHA256SUMS ok ({listed} files){UNSIGNED}"
    verify = cli("verify", folder, env=unsigned_env())
    assert verify.returncode in (0, 4) and "build.log" not in verify.stderr, verify.stderr
    assert verify.stdout.startswith(f"Kit     {folder} (SHA256SUMS ok ({listed} files)"
                                    f"{UNSIGNED})")


def test_a_tampered_release_folder_fails_verify_and_floor(downloaded: Path,
                                                          tmp_path: Path) -> None:
    folder = copy(downloaded, tmp_path)
    flip_last_byte(folder / ASSET)
    for command in ("verify", "floor"):
        done = cli(command, folder, env=unsigned_env())
        assert done.returncode == EXIT_CHECK_FAILED
        assert f"{ASSET} does not match SHA256SUMS" in done.stderr


def test_verify_and_floor_check_what_fetch_left_in_dest(fetched: Path, tmp_path: Path) -> None:
    words = (f"SHA256SUMS ok (BUILDINFO.txt, SHA1SUMS, {ASSET}); kit/ not checked file by "
             f"file: {ASSET} carries no kit/MANIFEST.json (packed before kits listed their "
             f"files){UNSIGNED}")
    with open_kit(fetched) as kit:
        assert kit.checked == words
    floor = cli("floor", fetched, "--json", env=unsigned_env())
    assert floor.returncode == 0 and json.loads(floor.stdout)["checked"] == words
    damaged = copy(fetched, tmp_path)
    flip_last_byte(damaged / "BUILDINFO.txt")
    done = cli("floor", damaged, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert f"{damaged / 'BUILDINFO.txt'} does not match the SHA256SUMS beside it" in done.stderr


def test_a_tarball_beside_its_sha256sums_is_checked(downloaded: Path, tmp_path: Path) -> None:
    with open_kit(downloaded / ASSET) as kit:
        assert kit.checked == f"SHA256SUMS beside it ok, SHA1SUMS ok{UNSIGNED}"
    done = cli("floor", downloaded / ASSET, "--json", env=unsigned_env())
    assert json.loads(done.stdout)["checked"] == f"SHA256SUMS beside it ok, SHA1SUMS ok{UNSIGNED}"
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(downloaded / ASSET, alone / ASSET)
    with open_kit(alone / ASSET) as kit:
        assert kit.checked == "an archive on its own: no SHA256SUMS beside it"


@pytest.mark.parametrize("command", ["verify", "floor"])
def test_a_tampered_tarball_beside_its_sha256sums_is_refused(
        downloaded: Path, tmp_path: Path, command: str) -> None:
    folder = copy(downloaded, tmp_path)
    flip_last_byte(folder / ASSET)
    done = cli(command, folder / ASSET, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED, done.stdout
    assert f"{folder / ASSET} does not match the SHA256SUMS beside it" in done.stderr
    # a SHA1SUMS that disagrees is refused as well, and one that SHA256SUMS does not list
    folder = copy(downloaded, tmp_path / "sha1")
    (folder / "SHA1SUMS").write_text((folder / "SHA1SUMS").read_text().replace(
        kitdir.read_kit_dir(folder).sha1 or "", "0" * 40))
    done = cli(command, folder / ASSET, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert f"{folder / ASSET} does not match the SHA1SUMS beside it" in done.stderr
    (folder / ASSET).rename(folder / "renamed.tar.gz")
    done = cli(command, folder / "renamed.tar.gz", env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert "the SHA256SUMS beside it does not list renamed.tar.gz" in done.stderr


# --------------------------------------------------------------------------- inspect


@pytest.mark.parametrize("which", ["published", "downloaded"])
def test_inspect_of_a_kit_folder_reads_its_kit_tarball(which: str, built: kitdir.KitDir,
                                                       request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(which)
    done = cli("inspect", folder, "--json")
    assert done.returncode == 0, done.stderr
    paths = [entry["path"] for entry in json.loads(done.stdout)["files"]]
    assert paths == ["kit/bin/ninfer", "kit/bin/ninfer-serve"]
    assert f"reading its kit tarball {ASSET}" in done.stderr
    assert f"ninfer-kits inspect {folder / PORTABLE}" in done.stderr
    text = cli("inspect", built.path, "--floor-only")
    assert text.returncode == 0
    assert text.stdout.startswith(f"Runtime floor of {built.tarball} (2 ELF files)")


def test_inspect_of_a_tampered_kit_folder_is_refused(downloaded: Path, tmp_path: Path) -> None:
    folder = copy(downloaded, tmp_path)
    flip_last_byte(folder / ASSET)
    done = cli("inspect", folder)
    assert done.returncode == EXIT_CHECK_FAILED
    assert f"{ASSET} does not match SHA256SUMS" in done.stderr


# --------------------------------------------------------------------------- diff, repro --against


@pytest.mark.parametrize("which", ["published", "downloaded", "fetched"])
def test_a_release_compares_identical_with_the_build_it_came_from(
        which: str, built: kitdir.KitDir, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(which)
    comparison = compare(folder, built.path)
    assert comparison.identical, [member.path for member in comparison.members]
    notes = "\n".join(comparison.notes)
    assert "build.log only in b (a lacks it, as a published or downloaded" in notes
    extras = {"published": f"{NOTES}, {PYZ} in a", "downloaded": f"{PYZ} in a",
              "fetched": "kit/ in a"}[which]
    assert f"not the kit's, not compared: {extras}" in notes
    if which == "fetched":
        assert f"{PORTABLE} only in b" in notes
    done = cli("diff", folder, built.path)
    assert done.returncode == 0 and "identical:" in done.stdout, done.stdout


def test_a_release_of_another_build_still_differs(downloaded: Path, tmp_path: Path) -> None:
    """Leaving out what is not the kit's hides nothing of the kit: another payload differs."""
    other = make_kit(tmp_path / "dist", compile_program(tmp_path), payload=b"another build\n",
                     portable=True)
    comparison = compare(downloaded, other.path)
    assert not comparison.identical
    assert f"{ASSET}/kit/share/payload.bin" in [member.path for member in comparison.members]


def test_publish_of_a_release_without_sha1sums_says_so(downloaded: Path,
                                                       tmp_path: Path) -> None:
    folder = copy(downloaded, tmp_path / "dist")
    (folder / "SHA1SUMS").unlink()
    done = cli("publish", folder, "--to", "local", "--out", tmp_path / "out", "--matrix",
               matrix_file(tmp_path, portable=True), "--cache-dir", tmp_path / "cache")
    assert done.returncode == EXIT_CHECK_FAILED
    assert "SHA1SUMS missing (a release carries it" in done.stderr


def test_the_tarball_and_sha256sums_alone_compare_with_the_build(
        downloaded: Path, built: kitdir.KitDir, tmp_path: Path) -> None:
    """What the release notes download at least: the tarball and SHA256SUMS (BUILDINFO.txt's
    line in it still compares; the tarball's own kit/BUILDINFO.txt too)."""
    folder = tmp_path / "two-files"
    folder.mkdir()
    for name in (ASSET, "SHA256SUMS"):
        shutil.copy2(downloaded / name, folder / name)
    comparison = compare(folder, built.path)
    assert comparison.identical, [member.path for member in comparison.members]
    assert "build.log, BUILDINFO.txt, SHA1SUMS only in b (a lacks it" in "\n".join(
        comparison.notes)
    tampered = make_kit(tmp_path / "dist", compile_program(tmp_path), payload=b"x\n",
                        portable=True)
    assert not compare(folder, tampered.path).identical
