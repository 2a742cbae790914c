"""The folders commands leave their results in (build's --dist, fetch's --dest, publish's --out)
on real file systems that cannot take them: a read-only tmpfs and a tmpfs of a few kilobytes,
mounted in a mount namespace of the test's own (`unshare`, as any user may where user
namespaces are on). Each is said before the long work, in one line naming the folder, with the
same exit status everywhere: 3, the environment's (README's table); a path that is a file is
bad input, 2. Issue 39 found build's --dist only after the compile, with a raw [Errno 30]."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_fetch import make_kit, publish_folder
from test_publish_support import matrix_file
from unsigned import unsigned_matrix

from tools import ROOT

MOUNT = 'mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@"'
READ_ONLY = "ro"
TINY = "size=8k"  # a page or two: full after the first file


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                          capture_output=True, check=False)
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _unshare_works(),
                                reason="no unprivileged mount namespace (unshare) here")


def on_tmpfs(options: str, mount: Path, *args: str | Path, cwd: Path
             ) -> subprocess.CompletedProcess[str]:
    """`ninfer-kits ARGS` with a tmpfs mounted (`options`) on `mount`, seen by it alone."""
    mount.mkdir(parents=True, exist_ok=True)
    environ = {key: value for key, value in os.environ.items()
               if key not in ("NINFER_KITS_MATRIX", "GITHUB_TOKEN", "GH_TOKEN")}
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT,
                           "sh", options, str(mount), sys.executable, "-m", "ninfer_kits",
                           *map(str, args)], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120, check=False)


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr and "[Errno" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ninfer-kits")]
    assert len(lines) == 1, done.stderr
    return lines[0]


# --------------------------------------------------------------------------- build --dist


@pytest.mark.parametrize("options", [READ_ONLY, TINY])
def test_build_says_a_dist_it_cannot_fill_before_anything_runs(options: str,
                                                               tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    dist = mount / "dist"
    done = on_tmpfs(options, mount, "build", "example", "--matrix", ROOT / "matrix.toml",
                    "--dist", dist, "--cache-dir", tmp_path / "cache", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    if options == READ_ONLY:
        assert line == (f"ninfer-kits: error: --dist {dist}: cannot be written (in {mount}, "
                        f"where it would be made): it is on a read-only file system"), line
    else:
        assert line.startswith(f"ninfer-kits: error: --dist {dist}: "), line
        assert line.endswith(" MB free on its file system, and at least 100 MB is needed there "
                             "for the kit's tarballs"), line
    assert not (tmp_path / "cache").exists()  # no work folder, no mirror, no compile
    assert "==> " not in done.stderr


def test_build_refuses_a_dist_that_is_a_file_as_bad_input(tmp_path: Path) -> None:
    (tmp_path / "dist").write_text("")
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "build", "example", "--matrix",
                           str(ROOT / "matrix.toml"), "--dist", "dist/x", "--cache-dir",
                           str(tmp_path / "cache")], cwd=tmp_path, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 2
    assert error_line(done) == "ninfer-kits: error: --dist dist/x: not a folder (dist is not a " \
                               "folder)"


# --------------------------------------------------------------------------- fetch --dest

TAG = "v0.6.1-rtx3090-linux-sm86"


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ with one small release (3 MB, incompressible)."""
    place = tmp_path_factory.mktemp("releases")
    publish_folder(make_kit(place / "tree"), place / "dist")
    return place / "dist"


@pytest.fixture(scope="module")
def zeros(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/ with a release whose tarball is small and whose kit is 4 MB of zeros: room for
    the tarball twice is no room for the kit."""
    place = tmp_path_factory.mktemp("zeros")
    kit = make_kit(place / "tree", filler=0)
    (kit / "lib" / "libzeros.so.1").write_bytes(bytes(4 << 20))
    publish_folder(kit, place / "dist")
    return place / "dist"


def fetch_into(options: str, dest: Path, dist: Path, cwd: Path
               ) -> subprocess.CompletedProcess[str]:
    return on_tmpfs(options, dest.parent, "fetch", TAG, "--from", dist, "--dest", dest,
                    "--matrix", unsigned_matrix(), cwd=cwd)


def test_fetch_says_a_read_only_dest_before_downloading(tmp_path: Path, releases: Path) -> None:
    dest = tmp_path / "mnt" / "box"
    done = fetch_into(READ_ONLY, dest, releases, tmp_path)
    assert done.returncode == 3, done.stderr
    assert error_line(done) == (f"ninfer-kits: error: --dest {dest}: cannot be written (in "
                                f"{dest.parent}, where it would be made): it is on a read-only "
                                f"file system")


def test_fetch_says_a_dest_without_room_for_the_kit_before_downloading(
        tmp_path: Path, releases: Path) -> None:
    dest = tmp_path / "mnt" / "box"
    done = fetch_into("size=1m", dest, releases, tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    assert line.startswith(f"ninfer-kits: error: --dest {dest}: 1.0 MB free on its file system, "
                           f"and at least "), line
    assert line.endswith(" MB is needed there for the tarball and the kit unpacked from it"), line


def test_a_disk_filling_while_unpacking_names_the_file_in_dest(tmp_path: Path,
                                                               zeros: Path) -> None:
    # It named /tmp ("cannot write a copy of it to /tmp"), where nothing was written.
    dest = tmp_path / "mnt" / "box"
    done = fetch_into("size=2m", dest, zeros, tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    assert f"cannot write {dest}/" in line or f"a copy of it to {dest}/" in line, line
    assert line.endswith(": no space left on the device"), line
    assert "/tmp:" not in line and "short write" not in line


# --------------------------------------------------------------------------- publish --out


@pytest.mark.parametrize("options", [READ_ONLY, TINY, "size=2m"])
def test_publish_out_is_judged_as_builds_dist(options: str, tmp_path: Path,
                                              program: Path) -> None:
    # It exited 2 where build and fetch exit 3 for the same folder. 2 MB: room enough to
    # start, not for the release's 3 MB tarball (said before any file is copied).
    from test_publish_support import make_kit as make_kit_folder

    kit = make_kit_folder(tmp_path / "dist", program, payload=os.urandom(3 << 20))
    out = tmp_path / "mnt" / "out"
    done = on_tmpfs(options, out.parent, "publish", kit.path, "--matrix", matrix_file(tmp_path),
                    "--out", out, "--cache-dir", tmp_path / "cache", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    label = f"the local release folder {out} (--out)"
    if options == READ_ONLY:
        assert line == (f"ninfer-kits: error: {label}: cannot be written (in {out.parent}, "
                        f"where it would be made): it is on a read-only file system"), line
    else:
        assert line.startswith(f"ninfer-kits: error: {label}: "), line
        assert line.endswith(" is needed there for the release's files"), line
    assert not (tmp_path / "releases").exists() or not any((tmp_path / "releases").iterdir())


def test_build_says_a_work_dir_it_cannot_write_before_anything_runs(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    done = on_tmpfs(READ_ONLY, mount, "build", "example", "--matrix", ROOT / "matrix.toml",
                    "--dist", tmp_path / "dist", "--cache-dir", tmp_path / "cache",
                    "--work-dir", mount / "work", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert error_line(done) == (f"ninfer-kits: error: --work-dir {mount / 'work'}: cannot be "
                                f"written (in {mount}, where it would be made): it is on a "
                                f"read-only file system")
    assert not (tmp_path / "cache").exists() and not (tmp_path / "dist").exists()


# --------------------------------------------------------------------------- any other write


def test_an_os_error_no_code_words_is_said_as_path_and_words(tmp_path: Path) -> None:
    # `index` writes index.json into the ledger folder; read-only, the write fails with an
    # OSError that reaches the top: said as every other message, never "[Errno 30] …".
    mount = tmp_path / "mnt"
    done = on_tmpfs(READ_ONLY, mount, "index", "--ledger-dir", mount, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    assert line.startswith(f"ninfer-kits: error: {mount}/"), line
    assert line.endswith(": a read-only file system"), line
