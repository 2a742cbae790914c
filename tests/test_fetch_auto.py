"""`fetch --auto` (issue 23 item 3): the kit and flavour that will run here, chosen from the
kit index before anything is downloaded, judged by the target's own loader (the debootstrapped
bookworm and trixie roots of tests/roots.py, and this host) from the needs the index records;
the plain flavour where its libraries are there, else the portable one; none, said before any
download, naming what is unmet and the nearest kit.

The needs are real: read by the inspector from real ELF files of the trixie and bookworm
roots (trixie's libavformat.so.61 stands for a plain kit linking FFmpeg 7, bookworm's
/usr/bin/true for a portable kit that needs only glibc 2.34, trixie's tar for a kit built
against glibc 2.38)."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.publish.needs import needs_of
from ninfer_kits.release import kitindex, ledger
from ninfer_kits.release.ledger import LedgerFlavour, LedgerNeeds
from ninfer_kits.verify import gpu_host
from test_fetch import (
    ASSET,
    PORTABLE,
    TAG,
    RangeServer,
    checkout,
    file_sha256,
    make_kit,
    make_portable,
    publish_folder,
)
from test_fetch import write_ledger as write_fetch_ledger
from test_publish_support import cli

NEWER_KIT, NEWER_TAG = "ninfer-all-sm86", "ninfer-all-v0.4.0-linux-sm86-1234abcd"
LIB = "usr/lib/x86_64-linux-gnu"


def needs(path: Path) -> LedgerNeeds:
    return needs_of(kit_floor([read_elf(path)]))


def _roots(roots: dict[str, Path]) -> tuple[Path, Path]:
    return roots["bookworm"], roots["trixie"]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("auto-release")
    kit = make_kit(place / "tree", filler=1 << 20)
    return publish_folder(kit, place / "dist", portable=make_portable(kit))


def _index(tmp_path: Path, roots: dict[str, Path], release: Path,
           server: RangeServer | None = None) -> Path:
    """index.json: kit ninfer-3090-sm86 (plain: FFmpeg 7; portable: glibc 2.34 only), and a
    kit published a day before it whose one flavour needs glibc 2.38."""
    bookworm, trixie = _roots(roots)
    base = server.url if server else "http://127.0.0.1:9"
    publisher = checkout(tmp_path / "publisher", base)
    if server is not None:
        server.add_folder(release, "/gh")
    write_fetch_ledger(publisher, release, {"github": f"{base}/gh"}, tag=TAG,
                       time="2026-11-30T08:00:00+00:00")
    write_fetch_ledger(publisher, release, {"github": f"{base}/gh"}, tag=NEWER_TAG,
                       kit=NEWER_KIT, time="2026-11-29T08:00:00+00:00")
    entries = []
    for entry in ledger.read_all(publisher.parent / "releases"):
        if entry.kit == NEWER_KIT:
            flavours = (LedgerFlavour(flavour="plain", asset=ASSET,
                                      needs=needs(trixie / "usr/bin/tar")),)
        else:
            flavours = (LedgerFlavour(flavour="plain", asset=ASSET,
                                      needs=needs(trixie / LIB / "libavformat.so.61")),
                        LedgerFlavour(flavour="portable", asset=PORTABLE,
                                      needs=needs(bookworm / "usr/bin/true")))
        entries.append(dataclasses.replace(entry, flavours=flavours, cuda_version="13.0.88",
                                           driver_minimum="580",
                                           distributions_as_of="2026-11-30"))
    path = tmp_path / "index.json"
    path.write_bytes(kitindex.render(kitindex.document(entries)))
    return path


def auto(tmp_path: Path, index: Path, *more: str | Path) -> tuple[int, str, str]:
    user = tmp_path / "user" / "checkout" / "matrix.toml"
    if not user.exists():
        checkout(tmp_path / "user", "http://127.0.0.1:9")  # an empty releases/: no ledger
    done = cli("fetch", "--auto", "--index", index, "--matrix", user, *more)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.usefixtures("proc_mounted")
def test_in_trixie_the_plain_kit_in_bookworm_the_portable_one(
        tmp_path: Path, roots: dict[str, Path], release: Path) -> None:
    bookworm, trixie = _roots(roots)
    index = _index(tmp_path, roots, release)
    code, out, err = auto(tmp_path, index, "--dry-run", "--root", trixie)
    assert (code, out) == (0, f"ninfer-kits fetch {TAG}\n"), err
    assert f"chosen: {TAG} (plain)" in err
    code, out, err = auto(tmp_path, index, "--dry-run", "--root", bookworm)
    assert (code, out) == (0, f"ninfer-kits fetch {TAG} --portable\n"), err
    # why not the plain kit: bookworm's FFmpeg is 5.1 (libavformat.so.59)
    assert f"{TAG} (plain) on root {bookworm}" in err and "libavcodec.so.61 not found" in err
    assert f"{NEWER_TAG} (plain) on root {bookworm}" in err and "lacks GLIBC_2.38" in err
    assert "the driver and the GPU are not checked in a root" in err


@pytest.mark.usefixtures("proc_mounted")
def test_none_runs_is_said_before_any_download(tmp_path: Path, roots: dict[str, Path],
                                                release: Path) -> None:
    bookworm, _ = _roots(roots)
    index = _index(tmp_path, roots, release)
    dest = tmp_path / "box"
    code, out, err = auto(tmp_path, index, NEWER_KIT, "--root", bookworm, "--dest", dest)
    assert code == 4 and out == ""
    assert (f"no published kit will run on root {bookworm} (Debian GNU/Linux 12 (bookworm)); "
            f"the nearest is {NEWER_TAG} (plain): libc.so.6 (") in err
    assert "lacks GLIBC_2.38. Nothing was downloaded" in err
    assert not dest.exists()


@pytest.mark.usefixtures("proc_mounted")
def test_the_chosen_flavour_is_the_one_downloaded(tmp_path: Path, roots: dict[str, Path],
                                                   release: Path,
                                                   server: RangeServer) -> None:
    bookworm, _ = _roots(roots)
    index = _index(tmp_path, roots, release, server)
    dest = tmp_path / "box"
    code, _, err = auto(tmp_path, index, "--root", bookworm, "--dest", dest)
    assert code in (0, 4), err  # then verify's, on this host
    assert file_sha256(dest / PORTABLE) == file_sha256(release / PORTABLE)
    assert not (dest / ASSET).exists()
    assert [seen.path for seen in server.state.seen if seen.path.endswith(".tar.gz")] == [
        f"/gh/{PORTABLE}"]


def test_on_this_host(tmp_path: Path, roots: dict[str, Path],
                      release: Path) -> None:
    """This machine's own loader, driver and GPUs: on CI (no GPU) nothing runs, for want of
    a driver, and the message says so; with a driver and a GPU, what runs is chosen."""
    index = _index(tmp_path, roots, release)
    code, out, err = auto(tmp_path, index, "--dry-run")
    host = gpu_host.probe_host()
    if host.no_driver:
        assert code == 4 and out == ""
        assert "An NVIDIA driver for CUDA 13 (driver ≥ 580 on Linux x86-64): none here" in err
        assert "Nothing was downloaded" in err
    else:
        assert (code == 0) == out.startswith("ninfer-kits fetch "), err


def test_without_any_index_or_ledger_it_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "index.json"
    empty.write_bytes(kitindex.render(kitindex.document([])))
    code, _, err = auto(tmp_path, empty, "--dry-run")
    assert code == 2
    assert f"fetch --auto: there is no published kit in the ledger " \
           f"({tmp_path / 'user' / 'checkout' / 'releases'}) " \
           f"or the kit index {empty}" in err


def test_auto_options_are_refused_alone(tmp_path: Path) -> None:
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    for args, said in ((("--dry-run", TAG), "--dry-run and --root choose with --auto only"),
                       ((), "name a kit or a release tag, or give --auto"),
                       (("--auto", "--portable"), "--auto chooses the flavour itself")):
        done = cli("fetch", *args, "--matrix", user)
        assert done.returncode == 2 and said in done.stderr, done.stderr


def test_published_at_orders_the_candidates() -> None:
    from ninfer_kits.verify.choose import candidates

    def entry(tag: str, kit: str, day: int) -> ledger.LedgerEntry:
        when = datetime.datetime(2026, 11, day, tzinfo=datetime.UTC)
        return ledger.LedgerEntry(
            tag=tag, kit=kit, card="c", upstream="o/n", upstream_url="u", revision="r",
            version="v", arch="sm_86", cuda_version="13.0", toolchain="t", asset="a.tar.gz",
            published_at=when, stores=(), assets=(), floor=())

    entries = [entry("a2", "a", 2), entry("b1", "b", 1), entry("a1", "a", 1)]
    assert [e.tag for e in candidates(entries)] == ["a2", "b1"]
    assert [e.tag for e in candidates(entries, "b")] == ["b1"]


@pytest.mark.usefixtures("proc_mounted")
def test_with_a_gpu_its_own_sass_wins_over_a_newer_kits_ptx(tmp_path: Path,
                                                            roots: dict[str, Path],
                                                            release: Path) -> None:
    """The GPU side, as verify judges it, from the report a host with an RTX 3090 (8.6) and a
    580 driver gives (the probe itself is checked on the GPU host: scripts/gpu-check.sh)."""
    from ninfer_kits.verify.choose import choose
    from ninfer_kits.verify.gpu_host import Gpu, GpuReport
    from ninfer_kits.verify.target import open_target

    _, trixie = _roots(roots)
    base = needs(trixie / "usr/bin/true")
    older, newer = sorted(kitindex.read(_index(tmp_path, roots, release)),
                          key=lambda entry: entry.published_at)
    sass = dataclasses.replace(base, sass=("sm_86",))
    ptx = dataclasses.replace(base, ptx=("compute_80",))
    entries = [
        dataclasses.replace(older, flavours=(LedgerFlavour(flavour="plain", asset=ASSET,
                                                           needs=sass),)),
        dataclasses.replace(newer, published_at=older.published_at + datetime.timedelta(days=2),
                            flavours=(LedgerFlavour(flavour="plain", asset=ASSET, needs=ptx),))]
    rtx3090 = GpuReport(driver_version="580.95.05", driver_source="nvidia-smi",
                        driver_cuda=(13, 0), gpus=(Gpu(0, "NVIDIA GeForce RTX 3090", 8, 6),),
                        gpu_source="nvidia-smi", cuda_error=None, problems=())
    with open_target(tmp_path, root=trixie) as target:
        choice = choose(entries, target, rtx3090)
        assert choice.chosen is not None and choice.chosen.entry.tag == older.tag
        assert choice.chosen.native and all(judged.runs for judged in choice.judged)
        hopper = dataclasses.replace(rtx3090, gpus=(Gpu(0, "NVIDIA H200", 9, 0),))
        choice = choose(entries, target, hopper)  # sm_86 SASS cannot run on 9.0; PTX can
        assert choice.chosen is not None and choice.chosen.entry.tag == newer.tag
        assert not choice.chosen.native
        old_driver = dataclasses.replace(rtx3090, driver_version="550.54.14",
                                         driver_cuda=(12, 4))
        choice = choose(entries, target, old_driver)
        assert choice.chosen is None
        assert all("An NVIDIA driver for CUDA 13" in judged.unmet[0]
                   for judged in choice.judged)


@pytest.mark.usefixtures("proc_mounted")
def test_the_zipapp_chooses_as_the_installation_does(
        tmp_path: Path, roots: dict[str, Path], release: Path) -> None:
    """The .pyz (standard library only, no site-packages) judges the same index the same way."""
    from test_fetch_pyz import build_pyz, run_pyz

    bookworm, trixie = _roots(roots)
    index = _index(tmp_path, roots, release)
    pyz = build_pyz(tmp_path / "ninfer-kits.pyz")
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    for root, wanted in ((trixie, f"ninfer-kits fetch {TAG}\n"),
                         (bookworm, f"ninfer-kits fetch {TAG} --portable\n")):
        done = run_pyz(pyz, "fetch", "--auto", "--dry-run", "--root", str(root), "--index",
                       str(index), "--matrix", str(user), cwd=tmp_path)
        assert (done.returncode, done.stdout) == (0, wanted), done.stderr
        assert "Traceback" not in done.stderr


def test_an_index_that_does_not_answer_leaves_the_ledger_said_so(tmp_path: Path,
                                                                  release: Path) -> None:
    """A ledger with releases, a kit index that does not answer: --auto chooses among the
    ledger's, and warns that a newer release may be in the index (issue 39: it said nothing)."""
    import socket

    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    write_fetch_ledger(user, release, {"github": "http://127.0.0.1:9/gh"}, tag=TAG,
                       time="2026-11-30T08:00:00+00:00")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        index = f"http://127.0.0.1:{probe.getsockname()[1]}/index.json"
    done = cli("fetch", "--auto", "--dry-run", "--index", index, "--matrix", user)
    assert "Traceback" not in done.stderr and done.returncode not in (2, 3), done.stderr
    assert f"warning: the kit index {index} did not answer (connection refused): choosing " \
           f"among the releases the ledger ({user.parent / 'releases'}) records only" \
           in done.stderr, done.stderr
