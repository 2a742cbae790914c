"""A flavour is data (issue 41): a toy flavour added with one registration, an entry of
ninfer_kits.kit.flavours.KINDS, is made by the build's flavour stage, recorded in BUILDINFO.txt,
published to the local store with the ledger's keys, the notes' words and the index's fetch
command derived from it, and fetched by `fetch --flavour toy`. And the files of today, which
know the plain and portable flavours only, read and write back to the same bytes."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from ninfer_kits import cli
from ninfer_kits.errors import BadInput
from ninfer_kits.files.atomic import write_file
from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.kit import buildinfo, flavours, kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix
from ninfer_kits.pipeline.builders import PreparedToolchain
from ninfer_kits.pipeline.buildinfo_keys import sibling_buildinfo
from ninfer_kits.pipeline.pack import pack_kit
from ninfer_kits.pipeline.stage_functions import make_flavours
from ninfer_kits.pipeline.state import BuildContext, BuildRequest, Flavour
from ninfer_kits.publish.stores.local import NOTES_FILE
from ninfer_kits.release import ledger
from ninfer_kits.release.checksums import write_sha1sums, write_sha256sums
from ninfer_kits.release.kitindex import HTML_NAME, JSON_NAME
from test_publish_support import (
    ASSET,
    KIT,
    TAG,
    compile_program,
    load,
    make_kit,
    matrix_file,
)

from tools import ROOT

TOY = flavours.FlavourKind(
    name="toy", suffix="-toy.tar.gz",
    purpose="the same build with a note beside its programs (`kit/TOY`)",
    make=f"{__name__}:make_toy")
TOY_ASSET = ASSET.removesuffix(".tar.gz") + "-toy.tar.gz"
NOTE = "a toy flavour\n"
TODAY = ROOT / "tests" / "data" / "flavours"  # files written by the ninfer-kits before this


def make_toy(build: BuildContext, toolchain: PreparedToolchain, plain: Flavour,
             tag: str) -> Flavour:
    """The toy flavour's make step (a pipeline.state.FlavourMaker): the plain kit/ and one
    file more."""
    root = build.workspace / "toy" / "kit"
    shutil.copytree(plain.root, root, symlinks=True)
    (root / "TOY").write_text(NOTE)
    return Flavour(name=TOY.name, root=root, asset=TOY.asset(plain.asset),
                   inspection=inspect_path(root / "bin"), licenses=plain.licenses)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> flavours.FlavourKind:
    """The toy flavour, registered: the only change to ninfer-kits this test makes."""
    monkeypatch.setattr(flavours, "KINDS", (*flavours.KINDS, TOY))
    return TOY


def toy_kit(tmp: Path, matrix: Matrix) -> kitdir.KitDir:
    """dist/<tag>/ with the plain kit and the toy flavour: the plain kit made without a compile
    as the publish tests make one (test_publish_support.make_kit: a gcc program packed by the
    pipeline's own pack), unpacked as the build's `assemble` leaves kit/, then the build's own
    flavour stage (make_flavours, which finds the toy's make step through the list), each
    flavour's BUILDINFO.txt (the build's sibling_buildinfo), pack_kit, the checksum files and
    kitdir.install, as the build's later stages do."""
    made = make_kit(tmp / "made", compile_program(tmp), manifest=True)
    work = tmp / "work"
    work.mkdir()
    subprocess.run(["tar", "xzf", str(made.tarball), "-C", str(work)], check=True)
    plain = Flavour(name=flavours.PLAIN, root=work / "kit", asset=ASSET,
                    inspection=inspect_path(work / "kit" / "bin"), licenses=made.info.licenses)
    request = BuildRequest(kit=matrix.kit(KIT), builder=None,  # type: ignore[arg-type]
                           project=tmp, dist_dir=tmp / "dist", cache_dir=tmp / "cache",
                           work_dir=work)
    build = BuildContext(request=request, workspace=work, staging=tmp / "staging", started=0.0,
                         reporter=Reporter())
    made_flavours = make_flavours(build, None, plain, TAG)  # type: ignore[arg-type]
    assert [flavour.name for flavour in made_flavours] == ["plain", "toy"]
    info = dataclasses.replace(made.info, flavour_assets=tuple(
        (flavour.name, flavour.asset) for flavour in made_flavours[1:]))
    staging = build.staging
    staging.mkdir()
    sha256s, sha1s = {}, {}
    for flavour in made_flavours:
        own = info if flavour.name == flavours.PLAIN else sibling_buildinfo(info, flavour)
        (flavour.root / kitdir.BUILDINFO).write_text(buildinfo.render(own, with_run=False))
        packed = pack_kit(flavour.root, staging / flavour.asset, mtime=info.source_date_epoch,
                          threads=1)
        sha256s[flavour.asset], sha1s[flavour.asset] = packed.sha256, packed.sha1
    written = write_file(staging / kitdir.BUILDINFO, buildinfo.render(info).encode())
    (staging / kitdir.BUILD_LOG).write_text("[1/1] Linking ninfer\n")
    write_sha256sums(staging / kitdir.SHA256SUMS, {**sha256s, kitdir.BUILDINFO: written.sha256})
    write_sha1sums(staging / kitdir.SHA1SUMS, sha1s)
    (tmp / "dist").mkdir()
    return kitdir.install(staging, tmp / "dist", TAG, KIT)


def test_a_toy_flavour_is_built_recorded_published_and_fetched(
        tmp_path: Path, toy: flavours.FlavourKind, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = matrix_file(tmp_path)
    kit = toy_kit(tmp_path, load(matrix))
    # built and recorded: its tarball beside the plain one, named in BUILDINFO.txt
    made = kit.flavour(toy.name)
    assert made is not None and made.asset == TOY_ASSET and kit.tarballs == (ASSET, TOY_ASSET)
    assert f"\ntoy_asset: {TOY_ASSET}\n" in kit.buildinfo_path.read_text()
    with tarfile.open(made.path) as archive:
        inner = archive.extractfile("kit/BUILDINFO.txt")
        note = archive.extractfile("kit/TOY")
        assert inner is not None and note is not None and note.read().decode() == NOTE
        assert buildinfo.parse(inner.read().decode()).flavour == "toy"

    # published: the ledger's toy_* keys, [[flavours]], the notes, the index
    out, releases = tmp_path / "published", tmp_path / "releases"
    assert cli.main(["publish", str(kit.path), "--to", "local", "--out", str(out), "--matrix",
                     str(matrix), "--ledger-dir", str(releases), "--cache-dir",
                     str(tmp_path / "cache")]) == 0, capsys.readouterr().err
    text = ledger.path_for(releases, TAG).read_text()
    assert (f'toy_asset = "{TOY_ASSET}"\ntoy_sha256 = "{made.sha256}"\ntoy_size = {made.size}\n'
            ) in text
    entry = ledger.read(ledger.path_for(releases, TAG))
    assert entry.tarball_of("toy") == ledger.LedgerTarball(
        flavour="toy", asset=TOY_ASSET, sha256=made.sha256, size=made.size)
    assert [item.flavour for item in entry.flavour_facts()] == ["plain", "toy"]
    assert (f"`{TOY_ASSET}` is the same build with a note beside its programs (`kit/TOY`):"
            in (out / TAG / NOTES_FILE).read_text())
    index = json.loads((releases / JSON_NAME).read_text())
    listed = next(item for item in index["kits"] if item["tag"] == TAG)
    assert [item["flavour"] for item in listed["flavours"]] == ["plain", "toy"]
    page = (releases / HTML_NAME).read_text()
    assert f"fetch {TAG} --flavour toy" in page
    assert "<dd>the same build with a note beside its programs (<code>kit/TOY</code>)" in page

    # fetched: --flavour toy takes its tarball, checked against the ledger, unpacked
    dest = tmp_path / "box"
    capsys.readouterr()
    done = cli.main(["fetch", TAG, "--flavour", "toy", "--from", str(out), "--dest", str(dest),
                     "--matrix", str(matrix), "--index", "none"])
    said = capsys.readouterr()
    # fetch ends with verify: 4 on a machine without an NVIDIA driver (the kit's CUDA 13)
    assert done == cli.main(["verify", str(dest), "--matrix", str(matrix)]) and done in (0, 4), \
        said.err
    assert "| Requirement" in said.out
    assert (dest / "kit" / "TOY").read_text() == NOTE and (dest / TOY_ASSET).is_file()
    assert buildinfo.read(dest / "kit" / kitdir.BUILDINFO).flavour == "toy"
    assert not (dest / ASSET).exists() and f"the toy kit {TOY_ASSET}" in said.err


def test_without_the_registration_the_toy_is_no_flavour(tmp_path: Path) -> None:
    """What the registration adds: without it the key and the option are unknown."""
    text = (TODAY / "BUILDINFO-plain.txt").read_text() + f"toy_asset: {TOY_ASSET}\n"
    with pytest.raises(BadInput, match="unknown key 'toy_asset'"):
        buildinfo.parse(text)
    with pytest.raises(SystemExit) as refused:
        cli.main(["fetch", TAG, "--flavour", "toy", "--from", str(tmp_path)])
    assert refused.value.code == 2


@pytest.mark.parametrize("name", ["BUILDINFO-plain.txt", "BUILDINFO-portable.txt"])
def test_todays_buildinfo_files_read_and_write_back_the_same_bytes(name: str) -> None:
    text = (TODAY / name).read_text()
    info = buildinfo.parse(text)
    portable = "ninfer-example-kit-v0.3.0-sm86-portable.tar.gz"
    # the portable tarball's own file names itself, as the plain kit's names it
    assert info.flavour_assets == (("portable", portable),)
    assert info.asset_of("portable") == portable and info.asset_of("toy") is None
    assert buildinfo.render(info, with_run="run." in text) == text


@pytest.mark.parametrize("name", ["ledger-portable.toml", "ledger-plain.toml"])
def test_todays_ledger_files_read_and_write_back_the_same_bytes(name: str) -> None:
    text = (TODAY / name).read_text()
    entry = ledger.parse(text, name)
    portable = entry.tarball_of("portable")
    if name == "ledger-plain.toml":
        assert entry.tarballs == () and portable is None
        assert [item.flavour for item in entry.flavour_facts()] == ["plain"]
    else:
        assert portable == ledger.LedgerTarball(
            flavour="portable", asset="ninfer-example-kit-v0.3.0-sm86-portable.tar.gz",
            sha256="c" * 64, size=34)
        assert [item.flavour for item in entry.flavour_facts()] == ["plain", "portable"]
    assert ledger.render(entry) == text
