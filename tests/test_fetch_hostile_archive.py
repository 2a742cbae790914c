"""fetch against hostile archives and a DEST caught mid-change: trees deeper, longer, larger or
more tangled than a kit's (refused by name, exit 2, without a traceback, and nothing left in
DEST or around it), an older fetch's deep leftovers (removed), and a re-fetch failed, stopped
or killed at each rename of its switch (DEST then holds the earlier release's files or the new
one's, never a mix). Also the TOML readers, which share one refusal of deep nesting."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.fetch import extract, locate
from ninfer_kits.fetch.fetch import Fetcher
from ninfer_kits.fetch.http import Client
from ninfer_kits.files import tarsafe, trees
from ninfer_kits.inspector import archive
from ninfer_kits.release import ledger
from test_fetch import (
    ASSET,
    TAG,
    _member,
    _release_of,
    _tarball,
    cli,
    make_kit,
    publish_folder,
    quiet,
)
from test_fetch_hostile import assert_nothing_left, fetch_dir

from tools import ROOT

Members = list[tuple[tarfile.TarInfo, bytes | None]]


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two releases of the same tag and asset name, told apart by their bytes; the second
    without SHA1SUMS (a re-fetch must not leave the first one's beside it)."""
    place = tmp_path_factory.mktemp("switch")
    first = publish_folder(make_kit(place / "a", filler=1000), place / "dist-a")
    second = publish_folder(make_kit(place / "b", filler=2000), place / "dist-b")
    (second / "SHA1SUMS").unlink()
    return first, second


@pytest.fixture(scope="module")
def fetched(releases: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A DEST holding the first release, and what DEST holds after each release's fetch."""
    place = tmp_path_factory.mktemp("fetched")
    sets = []
    for number, folder in enumerate(releases):
        Fetcher(Client(), quiet()).fetch(_located(folder), place / str(number))
        sets.append(_contents(place / str(number)))
    return place / "0", sets[0], sets[1]


def _located(folder: Path) -> locate.Located:
    """The release in `folder` as fetch --from locates TAG there (bound to matrix.toml's kit)."""
    return locate.locate(TAG, str(folder), locate.context(ROOT / "matrix.toml"))


def _contents(dest: Path) -> dict[str, str]:
    """Every entry in DEST (dot files included: a staging folder left is a difference), each
    file by its sha256 and each link by its target."""
    found = {}
    for relative, status in trees.walk(dest):
        path = dest / relative
        if path.is_symlink():
            found[relative] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[relative] = f"folder {status.st_mode & 0o777:o}"
    return found


def _one_refusal(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.count("error:") == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("ninfer-kits: error: ") and "refused" in last, err
    for word in words:
        assert word in last, err


@pytest.fixture
def around(tmp_path: Path) -> tuple[Path, Callable[[], None]]:
    """DEST (an existing folder holding a file of the user's) among canaries; the check that
    nothing around it changed and nothing but that file is in it."""
    room = tmp_path / "room"
    dest = room / "box"
    dest.mkdir(parents=True)
    (dest / "mine.txt").write_text("the user's")
    (room / "canary.txt").write_text("outside DEST")
    (tmp_path / "canary.txt").write_text("above DEST")
    before = _contents(tmp_path / "room")

    def unchanged() -> None:
        assert _contents(room) == before
        assert (tmp_path / "canary.txt").read_text() == "above DEST"

    return dest, unchanged


# --------------------------------------------------------------------------- a tree's shape


DEEP = "kit/" + "d/" * 2000 + "f"


@pytest.mark.parametrize(("members", "words"), [
    pytest.param([_member(DEEP, data=b"x")], ("2,002 names deep", "kit/d/d/", "…(4,005 bytes)…"),
                 id="a member 2,000 folders deep"),
    pytest.param([_member("kit/" + "n" * 300, data=b"x")], ("a name in its path of 300 bytes",),
                 id="a name of 300 bytes"),
    pytest.param([_member("kit/" + ("n" * 200 + "/") * 22 + "f", data=b"x")],
                 ("a name of 4,427 bytes",), id="a path of 4,427 bytes"),
    pytest.param([_member("kit/", tarfile.DIRTYPE),
                  _member("kit/l", tarfile.SYMTYPE, link="a/" * 2500)],
                 ("a link target of 5,000 bytes",), id="a link target of 5,000 bytes"),
    pytest.param([_member("kit/", tarfile.DIRTYPE)]
                 + [_member(f"kit/l{n}", tarfile.SYMTYPE, link=f"l{n + 1}") for n in range(1200)],
                 ("member kit/l0", "through more than 40 links"), id="a chain of 1,200 links"),
    pytest.param([_member("kit/", tarfile.DIRTYPE), _member("kit/a", tarfile.SYMTYPE, link="b"),
                  _member("kit/b", tarfile.SYMTYPE, link="a")],
                 ("through more than 40 links",), id="a loop of links"),
])
def test_a_tree_no_kit_has_is_refused_naming_the_member(
        tmp_path: Path, around: tuple[Path, Callable[[], None]], members: Members,
        words: tuple[str, ...]) -> None:
    dest, unchanged = around
    code, err = fetch_dir(_release_of(tmp_path, _tarball(members)), dest)
    _one_refusal(code, err, *words)
    assert sorted(os.listdir(dest)) == ["mine.txt"]  # no .part, no staging folder
    unchanged()


def test_a_path_too_long_under_dest_is_refused_naming_the_member(tmp_path: Path) -> None:
    """Each name short enough, the whole under this DEST past PATH_MAX: refused before a
    write fails with a raw ENAMETOOLONG, and the download deleted."""
    name = "kit/" + ("n" * 250 + "/") * 12 + "f"  # 3,017 bytes
    dest = tmp_path.joinpath(*["p" * 200] * 6, "box")  # 1,200 bytes and more
    code, err = fetch_dir(_release_of(tmp_path, _tarball([_member(name, data=b"x")])), dest)
    _one_refusal(code, err, "kit/nnn", "would be longer than a path may be (4095 bytes)")
    assert not (tmp_path / ("p" * 200)).exists()  # the folders fetch made: gone


def test_more_members_than_the_bound_is_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound lowered to 4 (65,536 members take seconds to read): the fifth is refused."""
    monkeypatch.setattr(archive, "MAX_MEMBERS", 4)
    folder = _release_of(tmp_path, _tarball([_member(f"kit/f{n}", data=b"x") for n in range(5)]))
    dest = tmp_path / "inside" / "box"
    with pytest.raises(BadInput, match="member kit/f4: more than 4 members, which a kit "
                                       "archive holds at most: refused"):
        Fetcher(Client(), quiet()).fetch(_located(folder), dest)
    assert_nothing_left(dest)


def test_verify_of_a_deep_archive_is_one_refusal(tmp_path: Path) -> None:
    tarball = tmp_path / "deep.tar.gz"
    tarball.write_bytes(_tarball([_member(DEEP, data=b"x")]))
    done = cli("verify", str(tarball))
    _one_refusal(done.returncode, done.stderr, "2,002 names deep")


def test_the_bounds_are_what_docs_fetch_md_says() -> None:
    text = " ".join((ROOT / "docs" / "fetch.md").read_text().split())
    for fact in (f"{extract.EXPANSION_LIMIT}× the archive's size",
                 f"or {extract.MIN_TOTAL_LIMIT >> 30} GiB where that is more",
                 f"at most {archive.MAX_MEMBERS:,} members",
                 f"at most {archive.MAX_DEPTH} names deep",
                 f"no name longer than {archive.NAME_MAX} bytes",
                 f"longer than {archive.PATH_MAX - 1:,} bytes",
                 f"more than {trees.MAX_SYMLINKS} links"):
        assert fact in text, fact


@pytest.mark.parametrize("members", [
    pytest.param([_member(DEEP, data=b"x")], id="a member 2,000 folders deep"),
    pytest.param([*(_member(f"l{n}", tarfile.SYMTYPE, link=f"l{n + 1}")
                    for n in reversed(range(1200))), _member("l0/x", data=b"x")],
                 id="a chain of 1,200 links"),
])
@pytest.mark.parametrize("policy", ["data", "tar"])
# ("native": tarfile's own filters, on the Pythons that have them; 3.11.2 has not)
@pytest.mark.parametrize("how", ["checked", *(["native"] if tarsafe.NATIVE_FILTERS else [])])
def test_the_build_sides_extraction_refuses_the_same_trees(
        tmp_path: Path, members: Members, policy: tarsafe.Policy, how: str) -> None:
    """tarsafe (upstream sources, image exports): refused, on the Pythons with tarfile's
    filters and without, where tarfile's makedirs and realpath would recurse past the limit."""
    extract_all = tarsafe.extract_all if how == "native" else tarsafe.extract_all_checked
    (tmp_path / "out").mkdir()
    with tarfile.open(fileobj=io.BytesIO(_tarball(members))) as opened, \
            pytest.raises(tarsafe.UnsafeMember, match=r"names deep|through more than 40 links"):
        extract_all(opened, tmp_path / "out", policy=policy)


# --------------------------------------------------------------------------- deep leftovers


def _deep_folders(top: Path, depth: int) -> None:
    """top/dddd/dddd/…/f, `depth` folders deep: past the recursion limit (1,000) and, at 5
    bytes a level, past PATH_MAX (made relative to open folders)."""
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("dddd", dir_fd=fd)
        fd, outer = os.open("dddd", os.O_RDONLY, dir_fd=fd), fd
        os.close(outer)
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)


def test_an_older_fetchs_deep_leftovers_are_removed(tmp_path: Path,
                                                     releases: tuple[Path, Path]) -> None:
    """What an older ninfer-kits left after a deep archive: a killed fetch's staging folder and
    a kit/ holding a tree 1,050 folders deep. The next fetch removes both and succeeds."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    dest = tmp_path / "box"
    stale = dest / f".ninfer-kits-fetch-{gone.pid}-x"
    (dest / "kit").mkdir(parents=True)
    stale.mkdir()
    (dest / "kit" / "BUILDINFO.txt").write_text("an older kit\n")
    for top in (stale, dest / "kit"):
        _deep_folders(top, 1050)
    code, err = fetch_dir(releases[0], dest)
    assert code == 0 and "Traceback" not in err, err
    assert sorted(os.listdir(dest)) == sorted({*os.listdir(releases[0]), "kit"} - {"build.log"})
    assert not (dest / "kit" / "dddd").exists()


# --------------------------------------------------------------------------- DEST in one step

KILLER = """
import io, os, signal, sys
from pathlib import Path
from ninfer_kits.fetch import locate
from ninfer_kits.fetch.fetch import Fetcher
from ninfer_kits.fetch.http import Client
from ninfer_kits.log import Reporter

folder, dest, at, how = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rename, count = os.rename, 0

def counted(*args, **kwargs):
    global count
    count += 1
    if count == at:
        os.kill(os.getpid(), getattr(signal, how))
    return rename(*args, **kwargs)

os.rename = counted
located = locate.locate(sys.argv[5], str(folder), locate.context(Path(sys.argv[6])))
Fetcher(Client(), Reporter(io.StringIO(), mode="plain")).fetch(located, dest)
"""


def _refetch(second: Path, dest: Path, at: int, how: str) -> int:
    """The second release fetched over DEST in a process of its own, sent SIGNAL `how` by
    itself as its rename number `at` begins; its exit status."""
    return subprocess.run([sys.executable, "-c", KILLER, str(second), str(dest), str(at), how,
                           TAG, str(ROOT / "matrix.toml")], check=False, timeout=60).returncode


def _settled_by_the_next_fetch(dest: Path, tmp_path: Path) -> None:
    """The next fetch into DEST (of a release without SHA256SUMS, so that it stops as soon
    as it has settled what the killed one left)."""
    with pytest.raises(CheckFailed, match="has no SHA256SUMS"):
        Fetcher(Client(), quiet()).fetch(locate.Located(TAG, ASSET, "dir", "an empty folder",
                                                        {}), dest)


def _renames(first: dict[str, str], second: dict[str, str]) -> list[str]:
    """Which release DEST holds once a switch from `first` to `second` stops at each of its
    renames: each of DEST's files out, the commit, each new file in."""
    moved_out, moved_in = ({name for name in files if "/" not in name}
                           for files in (first, second))
    return ["first"] * (len(moved_out) + 1) + ["second"] * len(moved_in)


def _one_of_the_sets(found: dict[str, str], first: dict[str, str],
                     second: dict[str, str]) -> str:
    assert found in (first, second), sorted(set(found.items()) ^ set(first.items()))
    return "first" if found == first else "second"


def test_a_refetch_killed_at_each_rename_leaves_one_release_or_the_other(
        tmp_path: Path, releases: tuple[Path, Path],
        fetched: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    earlier, first, second = fetched
    outcomes = []
    for at in range(1, 20):
        dest = tmp_path / f"box{at}"
        shutil.copytree(earlier, dest, symlinks=True)
        code = _refetch(releases[1], dest, at, "SIGKILL")
        if code == 0:  # past the last rename: a whole fetch
            assert _contents(dest) == second
            break
        assert code == -signal.SIGKILL
        _settled_by_the_next_fetch(dest, tmp_path)
        outcomes.append(_one_of_the_sets(_contents(dest), first, second))
    # killed while DEST's files moved out: the first release; once they all had, the second
    assert outcomes == _renames(first, second)


def test_sigterm_during_the_switch_waits_for_it_to_end(
        tmp_path: Path, releases: tuple[Path, Path],
        fetched: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    earlier, first, second = fetched
    into_dest = _renames(first, second).index("second") + 1
    for at in (1, into_dest):  # the first rename out of DEST, the first into it
        dest = tmp_path / f"box{at}"
        shutil.copytree(earlier, dest, symlinks=True)
        assert _refetch(releases[1], dest, at, "SIGTERM") == 143
        assert _contents(dest) == second  # and no staging folder left


def test_a_refetch_failing_at_each_rename_is_settled_and_told(
        tmp_path: Path, releases: tuple[Path, Path],
        fetched: tuple[Path, dict[str, str], dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename of the switch fails (EIO, once: a disk going bad): the switch is undone
    before its commit and finished after it, and the message says which DEST holds."""
    earlier, first, second = fetched
    rename = os.rename
    for at, expected in enumerate(_renames(first, second), start=1):
        calls = 0

        def failing(*args: object, at: int = at) -> None:
            nonlocal calls
            calls += 1
            if calls == at:
                raise OSError(errno.EIO, "Input/output error")
            rename(*args)  # type: ignore[arg-type]

        dest = tmp_path / f"box{at}"
        shutil.copytree(earlier, dest, symlinks=True)
        monkeypatch.setattr(os, "rename", failing)
        with pytest.raises(EnvironmentFailure, match="cannot put the new release's files") as told:
            Fetcher(Client(), quiet()).fetch(_located(releases[1]), dest)
        monkeypatch.setattr(os, "rename", rename)
        which = _one_of_the_sets(_contents(dest), first, second)
        assert ("earlier release's files, as before" if which == "first" else
                "holds the new release's files") in str(told.value)
        assert which == expected


def test_a_hostile_second_release_leaves_the_first_as_it_was(
        tmp_path: Path, fetched: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    earlier, first, _ = fetched
    dest = tmp_path / "box"
    shutil.copytree(earlier, dest, symlinks=True)
    code, err = fetch_dir(_release_of(tmp_path, _tarball([_member(DEEP, data=b"x")])), dest)
    _one_refusal(code, err, "2,002 names deep")
    assert _contents(dest) == first


# --------------------------------------------------------------------------- TOML nested deep


def test_a_matrix_nested_2000_deep_is_invalid_toml(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text("[kits.x]\nv = " + "[" * 2000 + "]" * 2000 + "\n")
    done = cli("matrix", "--matrix", str(matrix))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (f"ninfer-kits: error: {matrix}: invalid TOML: arrays or "
                                   f"inline tables nested too deep")


def test_the_ledger_refuses_deep_nesting_as_the_matrix_does() -> None:
    with pytest.raises(BadInput, match=r"^x\.toml: invalid TOML: arrays or inline tables "
                                       r"nested too deep$"):
        ledger.parse("format = " + "{a = " * 2000 + "1" + "}" * 2000, "x.toml")
