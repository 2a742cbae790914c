"""Hostile and odd input to `ninfer-kits inspect`, each a real OS condition: FIFOs, devices,
unreadable files (checked by a process without root's override, in a user namespace), symlink
loops, /proc files that fail to read, a full disk (a tiny tmpfs in a mount namespace), archives
by their bytes rather than their names, huge bogus offsets. Every answer is one line that names
the path and what is wrong with it, exit status 2 (3 where the machine, not the input, failed),
and never a hang or a traceback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tools import missing

TIMEOUT = 60  # a hang fails the test instead of stalling the run


def inspect(*args: str | Path, env: dict[str, str] | None = None,
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [*prefix, sys.executable, "-m", "ninfer_kits", "inspect", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False,
                          timeout=TIMEOUT, env=env)


def one_line_error(done: subprocess.CompletedProcess[str], *words: str,
                   status: tuple[int, ...] = (2,)) -> str:
    assert done.returncode in status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture()
def elf_file(c_binaries: dict[str, Path]) -> Path:
    return c_binaries["glibc234"]


def _kit(tmp_path: Path, elf: Path) -> Path:
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    shutil.copyfile(elf, kit / "bin" / "app")
    return kit


# --- 7. FIFOs and other files that are not regular files ---------------------------------------

@pytest.mark.parametrize("name", ["pipe", "kit.tar.gz"])
def test_fifo_is_named_not_opened(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    one_line_error(inspect(fifo), str(fifo), "a FIFO (named pipe), not a regular file")
    one_line_error(inspect("--json", fifo), "a FIFO (named pipe)")


def test_device_is_named(tmp_path: Path) -> None:
    one_line_error(inspect("/dev/null"), "/dev/null: a character device, not a regular file")


def test_special_files_in_a_folder_are_skipped_by_name(tmp_path: Path, elf_file: Path) -> None:
    kit = _kit(tmp_path, elf_file)
    os.mkfifo(kit / "bin" / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(kit / "bin" / "socket"))
    try:
        done = inspect(kit)
        assert done.returncode == 0, done.stderr
        assert "skipped: bin/pipe: a FIFO (named pipe), not a regular file: not read" in done.stdout
        assert "skipped: bin/socket: a socket, not a regular file: not read" in done.stdout
        report = json.loads(inspect("--json", kit).stdout)
        assert [note["path"] for note in report["skipped"]] == ["bin/pipe", "bin/socket"]
        assert [f["path"] for f in report["files"]] == ["bin/app"]
    finally:
        server.close()


# --- 8. what cannot be read ----------------------------------------------------------------------

def _unprivileged() -> tuple[str, ...]:
    """Run as root in a new user namespace: root there has no capability over files owned by
    the real root, so permission bits count (chmod 000 is unreadable), as for any user."""
    unshare = shutil.which("unshare")
    if unshare is None:
        missing("unshare (util-linux), to read files without root's override")
        raise AssertionError
    probe = subprocess.run([unshare, "--user", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        missing("user namespaces (unshare --user)")
    return (unshare, "--user")


def test_unreadable_parts_are_named_and_fail(tmp_path: Path, elf_file: Path) -> None:
    kit = _kit(tmp_path, elf_file)
    shutil.copyfile(elf_file, kit / "bin" / "secret")
    (kit / "lib").mkdir()
    shutil.copyfile(elf_file, kit / "lib" / "libhidden.so")
    (kit / "bin" / "secret").chmod(0)
    (kit / "lib").chmod(0)
    prefix = _unprivileged()
    try:
        # The condition is real: this process cannot read them.
        probe = subprocess.run([*prefix, "cat", str(kit / "bin" / "secret")],
                               capture_output=True, text=True, check=False)
        assert probe.returncode != 0 and "Permission denied" in probe.stderr
        done = inspect(kit, prefix=prefix)
        line = one_line_error(done, str(kit), "2 paths under it could not be read",
                              "bin/secret (permission denied)", "lib (permission denied)")
        assert "not in the floor" in line
        assert "bin/app: ELF64" in done.stdout  # what could be read is still shown
        assert "(1 ELF file; 2 paths could not be read, see below)" in done.stdout
        as_json = inspect("--json", kit, prefix=prefix)
        assert as_json.returncode == 2
        assert json.loads(as_json.stdout)["unreadable"] == [
            {"path": "bin/secret", "why": "permission denied"},
            {"path": "lib", "why": "permission denied"}]
        one_line_error(inspect(kit / "bin" / "secret", prefix=prefix),
                       f"{kit / 'bin' / 'secret'}: permission denied")
        # As root (with the override), the same folder reads whole.
        assert inspect(kit).returncode == 0
    finally:
        (kit / "lib").chmod(0o755)
        (kit / "bin" / "secret").chmod(0o644)


def test_nothing_readable_is_an_error_too(tmp_path: Path, elf_file: Path) -> None:
    kit = _kit(tmp_path, elf_file)
    (kit / "bin").chmod(0)
    try:
        one_line_error(inspect(kit, prefix=_unprivileged()), "bin (permission denied)")
    finally:
        (kit / "bin").chmod(0o755)


# --- 10. messages that name the path and what is wrong with it ---------------------------------

def test_symlink_loop_is_called_a_loop(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    one_line_error(inspect(loop), f"{loop}: symlink loop")
    other = tmp_path / "a.tar.gz"
    other.symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(other)
    one_line_error(inspect(other), "symlink loop")


def test_dangling_symlink_names_its_target(tmp_path: Path) -> None:
    link = tmp_path / "kit.tar.gz"
    link.symlink_to("gone.tar.gz")
    one_line_error(inspect(link), f"{link}: a symlink to gone.tar.gz, which does not exist")


def test_proc_file_that_fails_to_read_is_named() -> None:
    one_line_error(inspect("/proc/self/mem"), "/proc/self/mem: input/output error")


def test_elf_named_like_a_tarball_is_read_as_elf(tmp_path: Path, elf_file: Path) -> None:
    target = tmp_path / "kit.tar.gz"
    shutil.copyfile(elf_file, target)
    done = inspect("--json", target)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["path"] == str(target)


def test_text_named_like_a_tarball(tmp_path: Path) -> None:
    target = tmp_path / "kit.tar.gz"
    target.write_text("not a tarball\n")
    one_line_error(inspect(target), str(target), "named like a kit archive, but neither",
                   "nor an ELF file")


@pytest.mark.parametrize("mode", ["w:xz", "w:bz2", "w"])
def test_other_tarballs_are_read(tmp_path: Path, elf_file: Path, mode: str) -> None:
    kit = _kit(tmp_path, elf_file)
    target = tmp_path / "kit.tar.whatever"  # the name says nothing
    with tarfile.open(target, mode) as archive:
        archive.add(kit, arcname="kit")
    done = inspect("--json", target)
    assert done.returncode == 0, done.stderr
    assert [f["path"] for f in json.loads(done.stdout)["files"]] == ["kit/bin/app"]


def test_unsupported_archives_say_what_they_are(tmp_path: Path, elf_file: Path) -> None:
    kit = _kit(tmp_path, elf_file)
    plain = tmp_path / "kit.tar"
    with tarfile.open(plain, "w") as archive:
        archive.add(kit, arcname="kit")
    zipped = tmp_path / "kit.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.write(elf_file, "kit/bin/app")
    one_line_error(inspect(zipped), f"{zipped}: a zip archive: not a supported archive")
    zstd = shutil.which("zstd")
    if zstd is not None:
        subprocess.run([zstd, "-q", str(plain), "-o", str(tmp_path / "kit.tar.zst")], check=True)
        one_line_error(inspect(tmp_path / "kit.tar.zst"),
                       "zstd-compressed: not a supported archive (kits are a tar archive")


def test_corrupt_member_names_archive_and_member(tmp_path: Path, elf_file: Path) -> None:
    import io

    target = tmp_path / "kit.tar.gz"
    data = elf_file.read_bytes()[:200]  # an ELF header, then nothing
    with tarfile.open(target, "w:gz") as archive:
        info = tarfile.TarInfo("kit/bin/app")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    one_line_error(inspect(target), f"{target}: member kit/bin/app: corrupt or truncated ELF")


@pytest.mark.parametrize(("field", "offset", "size"), [
    ("e_phoff", 0x20, 8), ("e_shoff", 0x28, 8), ("e_phnum", 0x38, 2), ("e_shnum", 0x3C, 2)])
def test_huge_offsets_and_counts_are_named(tmp_path: Path, elf_file: Path, field: str,
                                           offset: int, size: int) -> None:
    data = bytearray(elf_file.read_bytes())
    data[offset:offset + size] = b"\xff" * (size - 1) + b"\x7f"
    target = tmp_path / field
    target.write_bytes(bytes(data))
    line = one_line_error(inspect(target), f"{target}: corrupt or truncated ELF file (")
    assert "offset-sized" not in line and "cannot fit" not in line


def test_huge_dynamic_addresses_are_named(tmp_path: Path, elf_file: Path) -> None:
    """DT_STRTAB pointing at 2**63: an address in no segment, said so."""
    from elftools.elf.elffile import ELFFile

    data = bytearray(elf_file.read_bytes())
    with elf_file.open("rb") as stream:
        dynamic = ELFFile(stream).get_section_by_name(".dynamic")
        start, size = dynamic["sh_offset"], dynamic["sh_size"]
    for at in range(start, start + size, 16):
        tag, _value = struct.unpack_from("<qQ", data, at)
        if tag == 5:  # DT_STRTAB
            struct.pack_into("<Q", data, at + 8, 1 << 63)
    target = tmp_path / "strtab"
    target.write_bytes(bytes(data))
    one_line_error(inspect(target), str(target), "DT_STRTAB address 0x8000000000000000 lies in "
                                                 "no loadable segment")


def test_full_disk_is_named(tmp_path: Path, elf_file: Path) -> None:
    """An ELF member too big to hold in memory (> 64 MiB) goes to a temporary file; on a full
    disk (a 16 MiB tmpfs as TMPDIR, in a mount namespace) the message says where and why."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--mount", "true"], capture_output=True,
                                         check=False).returncode != 0:
        missing("a mount namespace (unshare --mount), for a small tmpfs")
    archive = _big_member_archive(tmp_path, elf_file, 96 << 20)
    small = tmp_path / "small-tmp"
    small.mkdir()
    script = ('mount -t tmpfs -o size=16m tmpfs "$1" && TMPDIR="$1" exec "$2" -m ninfer_kits '
              'inspect "$3"')
    done = subprocess.run([str(unshare), "--mount", "sh", "-c", script, "sh", str(small),
                           sys.executable, str(archive)], capture_output=True, text=True,
                          check=False, timeout=TIMEOUT)
    one_line_error(done, f"{archive}: member kit/bin/big: cannot write a copy of it to",
                   "no space left on the device", status=(2, 3))
    assert os.listdir(small) == []


def _big_member_archive(tmp_path: Path, elf_file: Path, size: int) -> Path:
    """kit/bin/big: a real ELF header followed by zeros up to `size` bytes, xz-compressed."""
    import io

    head = elf_file.read_bytes()
    archive_path = tmp_path / "big.tar.xz"

    class Padded(io.RawIOBase):
        def __init__(self) -> None:
            self.position = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
            count = min(len(buffer), size - self.position)
            chunk = head[self.position:self.position + count]
            buffer[:count] = chunk + bytes(count - len(chunk))
            self.position += count
            return count

    with tarfile.open(archive_path, "w:xz", preset=0) as archive:
        info = tarfile.TarInfo("kit/bin/big")
        info.size = size
        archive.addfile(info, io.BufferedReader(Padded()))
    return archive_path


def test_sigterm_leaves_no_temporary_file(tmp_path: Path, elf_file: Path) -> None:
    """The member goes to an unnamed temporary file (O_TMPFILE): TMPDIR stays empty while it is
    written, and after SIGTERM (which ends the process through SystemExit, status 143)."""
    import signal
    import time

    archive = _big_member_archive(tmp_path, elf_file, 512 << 20)
    temp = tmp_path / "tmp"
    temp.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "ninfer_kits", "inspect", str(archive)],
                               env={**os.environ, "TMPDIR": str(temp)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = False
    deadline = time.monotonic() + TIMEOUT
    while not seen and process.poll() is None and time.monotonic() < deadline:
        try:
            links = [os.readlink(f"/proc/{process.pid}/fd/{fd}")
                     for fd in os.listdir(f"/proc/{process.pid}/fd")]
        except OSError:
            links = []
        # The spool: an unnamed file in TMPDIR ("TMPDIR/#inode (deleted)"); not the named
        # probe file tempfile.gettempdir() writes and removes there first.
        seen = any(link.startswith(str(temp)) and link.endswith("(deleted)") for link in links)
        if seen:
            assert os.listdir(temp) == []  # written, and nameless
            process.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    _out, err = process.communicate(timeout=TIMEOUT)
    assert seen, "the spool file was never seen: the member was not large enough"
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert os.listdir(temp) == []


def test_many_sections_over_the_same_bytes_are_read_once(cuda_binaries: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """5,000 more section headers, all naming the same .nv_fatbin bytes: read once, said so."""
    from elftools.elf.elffile import ELFFile

    from ninfer_kits.inspector.elf import read_elf

    source = cuda_binaries["plain"]
    data = source.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    with source.open("rb") as stream:
        names = [section.name for section in ELFFile(stream).iter_sections()]
    table = data[shoff:shoff + 64 * shnum]
    fatbin = table[64 * names.index(".nv_fatbin"):64 * (names.index(".nv_fatbin") + 1)]
    extra = 5000
    header = bytearray(data[:64])
    struct.pack_into("<Q", header, 0x28, len(data))
    struct.pack_into("<H", header, 0x3C, shnum + extra)
    target = tmp_path / "crowded"
    target.write_bytes(bytes(header) + data[64:] + table + fatbin * extra)
    done = inspect("--json", target)
    assert done.returncode == 0, done.stderr
    info, original = read_elf(target), read_elf(source)
    assert info.device_code == original.device_code
    assert f"{extra} section(s) overlap bytes another one holds (.nv_fatbin" in info.remarks[0]
