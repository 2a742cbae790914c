"""What `ninfer-kits.pyz` holds and its build: a stdlib zipapp of the package with the matrix,
ledger and allowed_signers as of its build, so fetch, verify and inspect run on a box with
python3 alone (docs/fetch.md, "Nothing to install"). It unpacks itself into a cache folder on its
first start because the package reads its data and runs its GPU probe as files. Same inputs,
same bytes.
"""

from __future__ import annotations

import hashlib
import io
import zipapp
import zipfile
from collections.abc import Iterator
from pathlib import Path

from ninfer_kits import __version__
from ninfer_kits.config import resources, settings
from ninfer_kits.files import atomic

PACKAGE_DIR = Path(__file__).resolve().parent.parent
INTERPRETER = "/usr/bin/env python3"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
SKIP_SUFFIXES = (".pyc", ".pyo")
# Commands the zipapp runs; the others need the full installation.
COMMANDS = ("fetch", "kit-url", "verify", "inspect", "floor", "matrix", "settings")
# They import what the zipapp lacks; each says so in one line, exit 3.
NEEDS_FULL = ("build", "publish", "watch", "repro", "alert")
# The extra each needs besides the plain install (pyproject's optional-dependencies).
EXTRAS = {"build": "local", "repro": "local", "publish": "publish", "watch": "publish",
          "alert": "publish"}
FULL_INSTALL = "pip install ninfer-kits"  # a command the zipapp runs, meeting a module it lacks


def full_install(command: str) -> str:
    """What installs everything `command` needs."""
    extra = EXTRAS.get(command)
    return f"pip install 'ninfer-kits[{extra}]'" if extra else FULL_INSTALL

MAIN = '''\
"""ninfer-kits.pyz: unpack once into a cache folder, then run the ninfer-kits command line."""
import os
import sys

BUILD = "{build}"
VERSION = "{version}"
COMMANDS = {commands!r}
NEEDS_FULL = {needs_full!r}
FULL_INSTALL = {full_install!r}
EXTRAS = {extras!r}
EXIT_ENVIRONMENT = 3  # ninfer_kits.errors: what this machine lacks

if sys.version_info < (3, 11):
    sys.exit("ninfer-kits.pyz needs Python 3.11 or newer; this is " + sys.version.split()[0])


def _cache_roots():
    given = os.environ.get({pyz_cache!r})
    if given:
        yield given
        return
    xdg = os.environ.get({xdg_cache!r}) or os.path.join(os.path.expanduser("~"), ".cache")
    yield os.path.join(xdg, "ninfer-kits", "pyz")
    import tempfile
    yield os.path.join(tempfile.gettempdir(), "ninfer-kits-pyz-%d" % os.getuid())


def _private(folder):
    info = os.lstat(folder)
    import stat
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _unpacked():
    import shutil
    import tempfile
    import zipfile

    archive = os.path.dirname(os.path.abspath(__file__))
    problems = []
    for root in _cache_roots():
        target = os.path.join(root, BUILD)
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
            if not _private(root):
                raise OSError("not a private folder of this user")
            if os.path.isfile(os.path.join(target, ".complete")):
                return target
            staging = tempfile.mkdtemp(prefix=".unpack-", dir=root)
            try:
                with zipfile.ZipFile(archive) as zipped:
                    for name in zipped.namelist():
                        if name.startswith("ninfer_kits/"):
                            zipped.extract(name, staging)
                open(os.path.join(staging, ".complete"), "w").close()
                try:
                    os.rename(staging, target)
                except OSError:
                    if not os.path.isfile(os.path.join(target, ".complete")):
                        raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return target
        except OSError as error:
            problems.append("%s: %s" % (root, error))
    sys.exit("ninfer-kits.pyz: cannot unpack itself (" + "; ".join(problems)
             + "); set {pyz_cache} to a folder it can write")


def _install(command):
    extra = EXTRAS.get(command)
    return "pip install 'ninfer-kits[%s]'" % extra if extra else FULL_INSTALL


def _run():
    sys.path.insert(0, _unpacked())
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command in NEEDS_FULL:
        print("ninfer-kits.pyz runs " + ", ".join(COMMANDS) + "; `" + command
              + "` needs the full installation (" + _install(command) + ")", file=sys.stderr)
        return EXIT_ENVIRONMENT
    import ninfer_kits
    from ninfer_kits.cli import main

    ninfer_kits.FROM_ZIPAPP = True
    try:
        return main()
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing in ("", "ninfer_kits"):  # what it carries: a bug, shown as one
            raise
        print("ninfer-kits.pyz: `" + str(command) + "` needs the full installation here ("
              + _install(command) + "): the zipapp carries no " + missing, file=sys.stderr)
        return EXIT_ENVIRONMENT


if __name__ == "__main__":
    sys.exit(_run())
'''


def _package_files() -> Iterator[tuple[str, bytes]]:
    """(name in the archive, bytes) of the package: modules and data, not caches or _bundled."""
    for path in sorted(PACKAGE_DIR.rglob("*")):
        relative = path.relative_to(PACKAGE_DIR)
        if (not path.is_file() or "__pycache__" in relative.parts
                or relative.parts[0] == resources.BUNDLED.name
                or path.suffix in SKIP_SUFFIXES):
            continue
        yield f"ninfer_kits/{relative.as_posix()}", path.read_bytes()


def _bundled_files(matrix: Path | None) -> Iterator[tuple[str, bytes]]:
    """The matrix, the ledger beside it, and the Dockerfiles it names (shipped ones)."""
    base = f"ninfer_kits/{resources.BUNDLED.name}"
    dockerfiles = resources.dockerfiles_dir()
    for path in sorted(dockerfiles.glob(f"*{resources.DOCKERFILE_SUFFIX}")):
        yield f"{base}/{resources.DOCKERFILES_NAME}/{path.name}", path.read_bytes()
    if matrix is None:
        return
    yield f"{base}/matrix.toml", matrix.read_bytes()
    releases = matrix.parent / "releases"
    for path in sorted(releases.glob("*.toml")) if releases.is_dir() else ():
        yield f"{base}/releases/{path.name}", path.read_bytes()
    readme = releases / "README.md"
    if readme.is_file():
        yield f"{base}/releases/README.md", readme.read_bytes()
    signers = _allowed_signers(matrix)
    if signers is not None:
        yield f"{base}/{signers}", (matrix.parent / signers).read_bytes()


def _allowed_signers(matrix: Path) -> str | None:
    """[publish.signing] allowed_signers of the matrix, or None; read with toml_text alone
    (the matrix reader checked it, and the shared modules do not import it)."""
    from pathlib import PurePosixPath

    from ninfer_kits.config import toml_text

    data = toml_text.loads(matrix.read_text(encoding="utf-8"))
    publish = data.get("publish")
    signing = publish.get("signing") if isinstance(publish, dict) else None
    relative = signing.get("allowed_signers") if isinstance(signing, dict) else None
    if not isinstance(relative, str):
        return None
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or ".." in parts:
        return None  # load_matrix refuses such a path; never a member outside _bundled/
    return PurePosixPath(*parts).as_posix()


def contents(matrix: Path | None) -> list[tuple[str, bytes]]:
    return sorted([*_package_files(), *_bundled_files(matrix)])


def build(output: Path, matrix: Path | None) -> tuple[Path, str]:
    """Write the zipapp; (its path, its build id)."""
    members = contents(matrix)
    digest = hashlib.sha256()
    for name, data in members:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    build_id = f"{__version__}-{digest.hexdigest()[:16]}"
    main = MAIN.format(build=build_id, version=__version__, commands=COMMANDS,
                       needs_full=NEEDS_FULL, full_install=FULL_INSTALL,
                       extras=EXTRAS, pyz_cache=settings.PYZ_CACHE.name,
                       xdg_cache=settings.XDG_CACHE_HOME.name)
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in [("__main__.py", main.encode()), *members]:
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # Unix, whatever builds it
            archive.writestr(info, data, compresslevel=9)
    plain.seek(0)
    packed = io.BytesIO()
    zipapp.create_archive(plain, packed, interpreter=INTERPRETER)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(output, packed.getvalue(), mode=0o755)
    return output, build_id
