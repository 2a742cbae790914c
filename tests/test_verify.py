"""`ninfer-kits verify`: real kits (the example, and crafted RPATH/RUNPATH/$ORIGIN/version
layouts compiled here) on this host, in real Debian roots and in a Docker image; each verdict
in a root is checked against that root's own loader."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import is_elf, read_elf
from ninfer_kits.inspector.floor import SymbolVersion
from ninfer_kits.loader.facts import KIT_MOUNT
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.verify.check import verify
from ninfer_kits.verify.kit import open_kit
from ninfer_kits.verify.report import MISSING, OK, TOO_OLD, VerifyReport
from ninfer_kits.verify.target import open_target
from test_verify_loader import loader_verdict, our_verdict

from tools import ROOT, tool

SCHEMA = ROOT / "src" / "ninfer_kits" / "data" / "verify.schema.json"


def validate_schema(document: object) -> None:
    import jsonschema

    jsonschema.validate(document, json.loads(SCHEMA.read_text()))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "verify", *args],
                          capture_output=True, text=True, check=False)


def gcc(*args: str, cwd: Path) -> None:
    subprocess.run([tool("gcc"), *args], cwd=cwd, check=True, capture_output=True)


def crafted_kit(folder: Path, *, rpath_kind: str = "runpath", kit_version: str = "KIT_1",
                app_needs: str = "KIT_1") -> Path:
    """kit/bin/app → kit/lib/libk.so.1 (→ kit/lib/libj.so.1). app's search path is
    $ORIGIN/../lib as DT_RUNPATH or DT_RPATH; libk has none. libk defines `kit_version`,
    app was linked against one that defines `app_needs`."""
    lib = folder / "kit" / "lib"
    (folder / "kit" / "bin").mkdir(parents=True)
    lib.mkdir(parents=True)
    (lib / "j.c").write_text("int j(void) { return 1; }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,libj.so.1", "j.c", "-o", "libj.so.1", cwd=lib)
    (lib / "k.c").write_text("int j(void);\nint k(void) { return j(); }\n")
    for version in (app_needs, kit_version):  # the last one built stays in the kit
        (lib / "k.map").write_text(f"{version} {{ global: k; local: *; }};\n")
        gcc("-shared", "-fPIC", "-Wl,--version-script=k.map", "-Wl,-soname,libk.so.1", "k.c",
            "-L.", "-l:libj.so.1", "-o", "libk.so.1", cwd=lib)
        if version == app_needs:
            (lib / "app.c").write_text("int k(void);\nint main(void) { return k(); }\n")
            dtags = "--enable-new-dtags" if rpath_kind == "runpath" else "--disable-new-dtags"
            gcc("app.c", "-L.", "-l:libk.so.1", f"-Wl,{dtags},-rpath,$ORIGIN/../lib",
                "-Wl,-rpath-link,.", "-o", str(folder / "kit" / "bin" / "app"), cwd=lib)
    for source in lib.glob("*.[cm]*"):
        source.unlink()
    return folder


@contextmanager
def in_root(kit: Path, root: Path) -> Iterator[VerifyReport]:
    """verify's report for `kit` in `root`, with the kit also placed where the report says it
    is (KIT_MOUNT), so the root's own loader can be asked the same question."""
    placed = root / KIT_MOUNT.lstrip("/")
    shutil.rmtree(placed, ignore_errors=True)
    try:
        with open_kit(kit) as opened, open_target(opened.root, root=root) as target:
            shutil.copytree(opened.root, placed, symlinks=True)  # unpacked, as verify sees it
            report = verify(opened, target)
        yield report
    finally:
        shutil.rmtree(placed, ignore_errors=True)


def assert_agrees_with_the_loader(report: VerifyReport, root: Path) -> None:
    fs = RootFS(root)
    for resolution in report.resolutions:
        program = f"{KIT_MOUNT}/{resolution.program}"
        theirs = loader_verdict(root, program)
        ours = our_verdict(resolution, fs)
        assert ours == theirs, (resolution.program, theirs, ours)


def row(report: VerifyReport, start: str) -> tuple[str, str, str, str]:
    found = [r for r in report.rows if r.requirement.startswith(start)]
    assert found, (start, report.rows)
    return found[0].requirement, found[0].found, found[0].status, found[0].fix


# --------------------------------------------------------------------------- the example kit


@pytest.mark.slow
def test_example_kit_on_this_host(example_dist: Path) -> None:
    """Built here, its libraries all resolve here; whether it runs is the driver's and the
    GPU's to say: this machine kind has neither, so then the verdict is no, and why."""
    done = cli(str(example_dist))
    assert "SHA256SUMS ok" in done.stdout and "this host (" in done.stdout, done.stderr
    for soname in ("libcudart.so.13", "libcurl.so.4", "libstdc++.so.6", "libavformat.so."):
        assert any(soname in line and "| ok |" in line for line in done.stdout.splitlines()), \
            (soname, done.stdout)
    as_json = json.loads(cli(str(example_dist), "--json").stdout)
    assert as_json["schema_version"] == 1
    validate_schema(as_json)
    assert {p["program"] for p in as_json["programs"]} == {"kit/bin/ninfer",
                                                           "kit/bin/ninfer-serve"}
    assert all(p["loads"] for p in as_json["programs"])
    has_driver = Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi")
    if not has_driver:
        driver = [r for r in as_json["rows"] if r["requirement"].startswith("An NVIDIA driver")]
        assert [r["status"] for r in driver] == ["missing"], driver
        assert done.returncode == 4 and as_json["met"] is False
        assert "The kit will not run here as it is." in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_example_kit_in_a_root_agrees_with_its_loader(example_dist: Path, roots: dict[str, Path],
                                                      proc_mounted: None, suite: str) -> None:
    with in_root(example_dist, roots[suite]) as report:
        assert_agrees_with_the_loader(report, roots[suite])
    assert not report.met and report.exit_code == 4
    # The kit's RUNPATH is the build machine's toolkit: no CUDA runtime in a plain root.
    _, found, status, fix = row(report, "CUDA 13 runtime")
    assert status == MISSING and "cuda-cudart-13-0" in fix
    assert found == ("not found: not installed here (not in ld.so.cache nor in the system "
                     "folders); the kit's RUNPATH /usr/local/cuda-13.0/lib does not exist here "
                     "either")
    assert not report.resolutions[0].unbound  # what is there defines every symbol it uses
    ffmpeg = row(report, "libavformat.so.59")
    if suite == "bookworm":
        assert ffmpeg[2] == OK
    else:  # trixie has FFmpeg 7; the host-built kit links FFmpeg 5, which trixie lacks
        # simply not installed there: not the CUDA toolkit's RUNPATH's fault
        assert ffmpeg[1] == ("not found: not installed here (not in ld.so.cache nor in the "
                             "system folders)") and ffmpeg[2] == MISSING
        assert ffmpeg[3].startswith("no package of Debian 13 provides libavformat.so.59 (it "
                                    "has FFmpeg 7.1: libavformat.so.61)"), ffmpeg[3]
        assert "ninfer-kits fetch example --portable" in ffmpeg[3]
        assert "libavformat59" not in ffmpeg[3]


@pytest.mark.slow
def test_verify_an_image_reads_it_as_a_root(example_dist: Path, roots: dict[str, Path]) -> None:
    """--image exports the image's filesystem (nothing runs in it): the same rows as the
    exported root, plus the driver, which only a host supplies."""
    done = cli(str(example_dist), "--image", "ninfer-kits/verify-trixie:local", "--json")
    by_root = cli(str(example_dist), "--root", str(roots["trixie"]), "--json")
    assert done.returncode == by_root.returncode == 4, done.stderr
    validate_schema(json.loads(done.stdout))
    image_rows = json.loads(done.stdout)["rows"]
    assert [(r["requirement"], r["status"]) for r in image_rows] == [
        (r["requirement"], r["status"]) for r in json.loads(by_root.stdout)["rows"]]
    driver = [r for r in image_rows if "driver" in r["requirement"]]
    assert driver and driver[0]["found"].startswith("supplied by the driver at run time")


# --------------------------------------------------------------------------- crafted layouts


@pytest.mark.slow
def test_runpath_does_not_reach_a_dependency(tmp_path: Path, roots: dict[str, Path],
                                             proc_mounted: None) -> None:
    kit = crafted_kit(tmp_path / "runpath")
    with in_root(kit, roots["bookworm"]) as report:
        assert_agrees_with_the_loader(report, roots["bookworm"])
    assert [m.name for m in report.resolutions[0].missing] == ["libj.so.1"]
    assert row(report, "libj.so.1 (needed by")[2] == MISSING


@pytest.mark.slow
def test_rpath_reaches_a_dependency(tmp_path: Path, roots: dict[str, Path],
                                    proc_mounted: None) -> None:
    kit = crafted_kit(tmp_path / "rpath", rpath_kind="rpath")
    assert read_elf(kit / "kit" / "bin" / "app").rpath == ("$ORIGIN/../lib",)
    with in_root(kit, roots["bookworm"]) as report:
        assert_agrees_with_the_loader(report, roots["bookworm"])
    assert report.met
    via = {found.name: found.via for found in report.resolutions[0].found}
    assert via["libj.so.1"] == "RPATH of kit/bin/app"


@pytest.mark.slow
def test_a_kit_library_without_the_needed_version(tmp_path: Path, roots: dict[str, Path],
                                                  proc_mounted: None) -> None:
    kit = crafted_kit(tmp_path / "version", kit_version="KIT_1", app_needs="KIT_2")
    with in_root(kit, roots["bookworm"]) as report:
        assert_agrees_with_the_loader(report, roots["bookworm"])
    gaps = report.resolutions[0].gaps
    assert [(g.library, g.version) for g in gaps] == [("libk.so.1", "KIT_2")]


@pytest.mark.slow
def test_newer_glibc_and_libstdcxx_are_named(tmp_path: Path, roots: dict[str, Path],
                                             proc_mounted: None) -> None:
    """Programs of Debian 13 in a Debian 12 root: the glibc and libstdc++ rows say what the root
    has, what the kit needs, and which GCC provides it."""
    trixie = roots["trixie"]
    kit = tmp_path / "newer"
    (kit / "kit" / "bin").mkdir(parents=True)
    for chosen in (trixie / "usr" / "bin" / "chgrp", _trixie_cxx_file(trixie)):
        shutil.copy2(chosen, kit / "kit" / "bin" / chosen.name)
    with in_root(kit, roots["bookworm"]) as report:
        assert_agrees_with_the_loader(report, roots["bookworm"])
    _, found, status, fix = row(report, "x86-64 Linux, glibc ≥ 2.")
    assert status == TOO_OLD and found.startswith("glibc 2.36 (")
    assert "glibc ≥" in fix and "nvidia/cuda:" in fix
    _, found, status, fix = row(report, "libstdc++.so.6 providing")
    assert status == TOO_OLD
    assert found == "libstdc++.so.6 at /lib/x86_64-linux-gnu provides up to GLIBCXX_3.4.30"
    assert "(GCC 1" in fix and "or newer" in fix


def _trixie_cxx_file(trixie: Path) -> Path:
    """A trixie ELF file that needs a GLIBCXX newer than bookworm's 3.4.30 and no library
    bookworm lacks (libchromaprint, in these roots)."""
    runtime = {"libstdc++.so.6", "libc.so.6", "libm.so.6", "libgcc_s.so.1"}
    for folder in ("usr/bin", "usr/lib/x86_64-linux-gnu"):
        for path in sorted((trixie / folder).iterdir()):
            if not path.is_file() or path.is_symlink() or not is_elf(path):
                continue
            info = read_elf(path)
            needs = {SymbolVersion.parse(v) for n in info.version_needs for v in n.versions}
            if set(info.needed) <= runtime and any(
                    v.prefix == "GLIBCXX" and v.number > (3, 4, 30) for v in needs):
                return path
    pytest.fail("no trixie file needs a newer libstdc++ and nothing else bookworm lacks")
    raise AssertionError


# --------------------------------------------------------------------------- bad input


@pytest.mark.slow
def test_bad_input(tmp_path: Path, example_dist: Path) -> None:
    not_a_kit = tmp_path / "notes.txt"
    not_a_kit.write_text("hello\n")
    cases = [
        ((str(not_a_kit),), "not a kit archive"),
        ((str(tmp_path / "absent.tar.gz"),), "no such file or folder"),
        ((str(example_dist), "--root", str(tmp_path / "nowhere")), "not a folder"),
        ((str(example_dist), "--root", str(tmp_path)), "not a root filesystem"),
        ((str(example_dist), "--image", "ninfer-kits/no-such-image:none"), "no such image"),
        ((str(example_dist), "--ld-library-path", "relative/lib"), "give absolute folders"),
    ]
    for args, needle in cases:
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert needle in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.mark.slow
def test_a_damaged_download_is_refused(tmp_path: Path, example_dist: Path) -> None:
    copy = tmp_path / "dist"
    shutil.copytree(example_dist, copy)
    tarball = next(copy.glob("*.tar.gz"))
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    done = cli(str(copy))
    assert done.returncode == 1 and "does not match SHA256SUMS" in done.stderr, done.stderr
    assert os.listdir(copy)  # nothing was unpacked beside it


def test_a_chain_of_links_cannot_lead_a_file_out(tmp_path: Path) -> None:
    """kit/t -> ., kit/s -> t/../.., then a file kit/s/X: each link looks harmless alone; the
    file must not land outside the private folder (it is written before any link exists)."""
    import io
    import tarfile

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, link in (("kit/t", "."), ("kit/s", "t/../..")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
        for name in ("kit/s/ESCAPED-BY-VERIFY", "kit/bin/app"):
            data = b"x" if "ESCAPED" in name else (ROOT / "tests" / "data").joinpath(
                "kitapp.c").read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    done = cli(str(archive))
    assert done.returncode == 2 and "also holds other members: not a kit" in done.stderr, \
        done.stderr
    import glob
    import tempfile

    assert not glob.glob(str(Path(tempfile.gettempdir()) / "ESCAPED-BY-VERIFY"))
    assert not (tmp_path / "ESCAPED-BY-VERIFY").exists()


# --------------------------------------------------------------------------- exit status


def test_the_exit_status_tells_a_refusal_from_a_machine_that_cannot_run_it(
        tmp_path: Path) -> None:
    """Issue 38 item 8: 0 runs here; 4 sound, and this host lacks what it needs (a script can
    still use the kit elsewhere); 1 refused (do not trust it) — for verify and for fetch, which
    ends with verify."""
    from test_fetch import TAG, make_kit, publish_folder
    from test_fetch import cli as ninfer_kits
    from unsigned import unsigned_matrix

    runs = publish_folder(make_kit(tmp_path / "runs", filler=100), tmp_path / "runs" / "dist")
    lacking = publish_folder(make_kit(tmp_path / "lacks", filler=100,
                                      needs="libninfer-kits-absent.so.1"),
                             tmp_path / "lacks" / "dist")
    tampered = tmp_path / "tampered" / TAG
    shutil.copytree(lacking, tampered)
    sums = tampered / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(sums.read_text()[:8], "00000000", 1))
    matrix = str(unsigned_matrix())
    for folder, status, said in ((runs, 0, "the kit will load"),
                                 (lacking, 4, "The kit will not run here as it is."),
                                 (tampered, 1, "does not match")):
        verified = cli(str(folder), "--matrix", matrix)
        assert verified.returncode == status, verified.stdout + verified.stderr
        assert said in verified.stdout + verified.stderr
        fetched = ninfer_kits("fetch", TAG, "--from", str(folder.parent), "--matrix", matrix,
                              "--dest", str(tmp_path / f"box{status}"))
        assert fetched.returncode == status, fetched.stdout + fetched.stderr
        assert "Traceback" not in verified.stderr + fetched.stderr


def test_fetch_auto_with_nothing_that_runs_is_the_machines_verdict(tmp_path: Path) -> None:
    """No published kit will run on the root chosen for: exit 4, before anything is fetched."""
    from ninfer_kits.inspector.floor import kit_floor
    from ninfer_kits.publish.needs import needs_of
    from ninfer_kits.release import kitindex, ledger
    from ninfer_kits.release.ledger import LedgerFlavour
    from test_fetch import ASSET, checkout, make_kit, publish_folder, write_ledger
    from test_fetch import cli as ninfer_kits

    kit = make_kit(tmp_path / "tree", filler=100, needs="libninfer-kits-absent.so.1")
    release = publish_folder(kit, tmp_path / "dist")
    publisher = checkout(tmp_path / "publisher", "http://127.0.0.1:9")
    write_ledger(publisher, release, {"github": "http://127.0.0.1:9/gh"})
    needs = needs_of(kit_floor([read_elf(kit / "bin" / "app")]))
    entries = [dataclasses.replace(entry, flavours=(
        LedgerFlavour(flavour="plain", asset=ASSET, needs=needs),))
        for entry in ledger.read_all(publisher.parent / "releases")]
    index = tmp_path / "index.json"
    index.write_bytes(kitindex.render(kitindex.document(entries)))
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    done = ninfer_kits("fetch", "--auto", "--root", "/", "--index", str(index), "--matrix",
                       str(user), "--dest", str(tmp_path / "box"))
    assert done.returncode == 4, done.stderr
    assert "no published kit will run on root /" in done.stderr
    assert "libninfer-kits-absent.so.1" in done.stderr and "Nothing was downloaded" in done.stderr
    assert not (tmp_path / "box").exists()
