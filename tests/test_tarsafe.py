"""tarsafe: the same extraction, and the same refusals, with or without tarfile's filters.

`extract_all_checked` is what runs on Pythons before 3.11.4 (Debian 12's 3.11.2); it is called
here directly, so that it is tested on every Python, and compared with tarfile's own filters
where the Python has them."""

from __future__ import annotations

import io
import re
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ninfer_kits.files import tarsafe
from ninfer_kits.files.tarsafe import UnsafeMember

from tools import ROOT, missing

Extract = Callable[..., None]
PATHS = [pytest.param(tarsafe.extract_all_checked, id="checked")]
if tarsafe.NATIVE_FILTERS:
    PATHS.append(pytest.param(tarsafe.extract_all, id="native"))


def _member(name: str, kind: bytes = tarfile.REGTYPE, *, link: str = "", mode: int = 0o644,
            data: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.size = kind, link, mode, len(data)
    info.uid, info.gid, info.uname, info.gname = 4321, 4321, "someone", "someone"
    return info, data


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return raw.getvalue()


def _unpack(how: Extract, raw: bytes, dest: Path, policy: tarsafe.Policy,
            mode: str = "r") -> None:
    dest.mkdir(exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(raw), mode=mode) as archive:
        how(archive, dest, policy=policy)


HOSTILE = {
    "dotdot": [_member("../escaped", data=b"x")],
    "dotdot-inside": [_member("a/../../escaped", data=b"x")],
    "through-a-link": [_member("up", tarfile.SYMTYPE, link=".."),
                       _member("up/escaped", data=b"x")],
    "hardlink-out": [_member("hard", tarfile.LNKTYPE, link="../outside.txt")],
}
HOSTILE_DATA = {
    "absolute-link": [_member("passwd", tarfile.SYMTYPE, link="/etc/passwd")],
    "link-out": [_member("sub/out", tarfile.SYMTYPE, link="../../outside.txt")],
    "device": [_member("null", tarfile.CHRTYPE)],
    "fifo": [_member("pipe", tarfile.FIFOTYPE)],
}


@pytest.mark.parametrize("how", PATHS)
@pytest.mark.parametrize("policy", ["data", "tar"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_member_leaving_the_destination_is_refused(
    how: Extract, policy: tarsafe.Policy, case: str, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("keep")
    with pytest.raises(UnsafeMember, match="outside the destination"):
        _unpack(how, _tar(*HOSTILE[case]), tmp_path / "dest", policy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "outside.txt"]
    assert (tmp_path / "outside.txt").read_text() == "keep"


@pytest.mark.parametrize("how", PATHS)
@pytest.mark.parametrize("case", sorted(HOSTILE_DATA))
def test_the_data_policy_refuses_bad_links_and_special_files(
    how: Extract, case: str, tmp_path: Path
) -> None:
    with pytest.raises(UnsafeMember):
        _unpack(how, _tar(*HOSTILE_DATA[case]), tmp_path / "dest", "data")
    assert not any((tmp_path / "dest").rglob("*"))


@pytest.mark.parametrize("how", PATHS)
def test_the_tar_policy_keeps_links_that_point_anywhere(how: Extract, tmp_path: Path) -> None:
    """What an exported image holds: /lib -> usr/lib, and absolute links inside the root."""
    raw = _tar(_member("etc", tarfile.DIRTYPE, mode=0o755),
               _member("etc/localtime", tarfile.SYMTYPE, link="/usr/share/zoneinfo/UTC"))
    _unpack(how, raw, tmp_path, "tar")
    assert (tmp_path / "etc/localtime").readlink() == Path("/usr/share/zoneinfo/UTC")


@pytest.mark.parametrize("how", PATHS)
@pytest.mark.parametrize("policy", ["data", "tar"])
def test_names_lose_their_leading_slash_and_modes_their_dangerous_bits(
    how: Extract, policy: tarsafe.Policy, tmp_path: Path
) -> None:
    raw = _tar(_member("/kit", tarfile.DIRTYPE, mode=0o777),
               _member("/kit/tool", mode=0o6777, data=b"#!/bin/sh\n"),
               _member("/kit/notes", mode=0o466, data=b"n"),
               _member("/kit/tool-again", tarfile.LNKTYPE, link="kit/tool", mode=0o6777),
               _member("/kit/here", tarfile.SYMTYPE, link="tool"))
    _unpack(how, raw, tmp_path, policy, mode="r|")  # a stream, as git archive's and docker's
    tool = (tmp_path / "kit/tool").stat()
    assert stat.S_IMODE(tool.st_mode) == 0o755
    assert (tmp_path / "kit/tool").read_bytes() == b"#!/bin/sh\n"
    assert (tmp_path / "kit/tool-again").samefile(tmp_path / "kit/tool")
    assert (tmp_path / "kit/here").readlink() == Path("tool")
    notes = stat.S_IMODE((tmp_path / "kit/notes").stat().st_mode)
    assert notes == (0o644 if policy == "data" else 0o444)  # "data": the owner may write
    assert stat.S_IMODE((tmp_path / "kit").stat().st_mode) & 0o022 == 0


@pytest.mark.skipif(not tarsafe.NATIVE_FILTERS, reason="this Python has no tarfile filters")
@pytest.mark.parametrize("policy", ["data", "tar"])
def test_the_checks_made_here_write_what_the_filters_write(
    policy: tarsafe.Policy, tmp_path: Path
) -> None:
    raw = _tar(_member("d", tarfile.DIRTYPE, mode=0o750),
               _member("d/f", mode=0o4764, data=b"f"),
               _member("d/g", mode=0o600, data=b"g"),
               _member("d/x", mode=0o711, data=b"x"),
               _member("d/l", tarfile.SYMTYPE, link="f"),
               _member("d/h", tarfile.LNKTYPE, link="d/g"))

    def written(root: Path) -> list[tuple[str, int, bool]]:
        return sorted((str(p.relative_to(root)), stat.S_IMODE(p.lstat().st_mode), p.is_symlink())
                      for p in root.rglob("*"))

    _unpack(tarsafe.extract_all, raw, tmp_path / "native", policy)
    _unpack(tarsafe.extract_all_checked, raw, tmp_path / "checked", policy)
    assert written(tmp_path / "checked") == written(tmp_path / "native")


@pytest.mark.parametrize("policy", ["data", "tar"])
def test_one_member_at_a_time(policy: tarsafe.Policy, tmp_path: Path) -> None:
    raw = _tar(_member("ok", data=b"1"), _member("../bad", data=b"2"))
    dest = tmp_path / "dest"
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as archive:
        refused = []
        for member in archive:
            try:
                tarsafe.extract_checked(archive, member, dest, policy=policy)
            except UnsafeMember:
                refused.append(member.name)
    assert refused == ["../bad"]
    assert (dest / "ok").read_bytes() == b"1"
    assert not (tmp_path / "bad").exists()


def test_nothing_else_passes_filter_to_tarfile() -> None:
    """`filter=` is a TypeError on Python 3.11.2 (Debian 12's): only tarsafe may use it."""
    call = re.compile(r"\.extract(all)?\([^)]*\bfilter=")
    found = [f"{path.relative_to(ROOT)}"
             for folder in ("src", "tests", "build")
             for path in sorted((ROOT / folder).rglob("*.py"))
             if path.name != "tarsafe.py" and call.search(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_docker_builder_copies_its_output_out_of_a_container(tmp_path: Path) -> None:
    """copy_out on a real container: what Debian 12's own Python crashed on after a whole
    compile (`extractall(..., filter="data")`, a TypeError on 3.11.2)."""
    try:
        import docker
    except ImportError:
        missing("the docker SDK (pip install docker)")
    from ninfer_kits.pipeline.containers import copy_out

    from docker_fixtures import MINBASE_IMAGE, ensure_base_image, ensure_engine

    ensure_engine()
    ensure_base_image(MINBASE_IMAGE, include="")
    raw = _tar(_member("out", tarfile.DIRTYPE, mode=0o755),
               _member("out/kit", tarfile.DIRTYPE, mode=0o755),
               _member("out/kit/app", mode=0o4775, data=b"\x7fELF"),
               _member("out/kit/libx.so.1", tarfile.SYMTYPE, link="app"))
    client = docker.from_env()
    container = client.containers.create(MINBASE_IMAGE, command=["/nonexistent"])
    try:
        assert container.put_archive("/", raw)
        copy_out(container, "/out", tmp_path / "copied")
    finally:
        container.remove(force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copied"]
    app = tmp_path / "copied/kit/app"
    assert app.read_bytes() == b"\x7fELF" and stat.S_IMODE(app.stat().st_mode) == 0o755
    assert (tmp_path / "copied/kit/libx.so.1").readlink() == Path("app")
