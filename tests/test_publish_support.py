"""Helpers for tests/test_publish*.py (no tests here): real finished kit folders made with the
pipeline's own pack and kitdir functions, a matrix whose [publish] points at the test stores,
B2 through b2sdk's RawSimulator, and a sink that collects every text the tests capture."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ninfer_kits.files.atomic import write_file
from ninfer_kits.kit import attestations, buildinfo, flavours, kitdir, owed_sources
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.kit.owed_sources import OwedSources
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import GitHubTarget, Matrix, load_matrix
from ninfer_kits.net.remote import Secret
from ninfer_kits.net.retry import RetryPolicy
from ninfer_kits.pipeline.pack import pack_kit, pack_tree
from ninfer_kits.publish.stages import run_publish
from ninfer_kits.publish.state import Outcome, PublishRequest
from ninfer_kits.publish.store import Store
from ninfer_kits.release.checksums import (
    read_sha256sums,
    render_sums,
    write_sha1sums,
    write_sha256sums,
)
from ninfer_kits.stores.b2 import B2Target

from tools import ROOT, tool

REVISION = "9899488d" + "0123456789abcdef0123456789abcdef"
KIT = "example"
TAG = "example-v0.3.0-linux-sm86"
ASSET = "ninfer-example-kit-v0.3.0-sm86.tar.gz"
PORTABLE = "ninfer-example-kit-v0.3.0-sm86-portable.tar.gz"  # flavours.PORTABLE.asset(ASSET)
FAST = RetryPolicy(attempts=6, first_delay=0.001, max_delay=0.01, scale=0.001)
CANARY = "ghp_CANARY0123456789abcdefCANARY98765"
B2_CANARY = "K005CANARYb2applicationkey0123456789"

HELLO_C = """\
#include <stdio.h>
int main(void) { puts("ninfer (test kit)"); return 0; }
"""


def compile_program(out: Path) -> Path:
    """A real ELF executable (the kit's bin/ninfer)."""
    source = out / "hello.c"
    source.write_text(HELLO_C)
    program = out / "hello"
    subprocess.run([tool("gcc"), "-O1", "-o", str(program), str(source)], check=True)
    return program


def info_for(kit: str = KIT, *, revision: str = REVISION, version: str = "0.3.0",
             run: tuple[tuple[str, str], ...] = (("jobs", "2"),)) -> BuildInfo:
    return BuildInfo(
        kit=kit, card="any sm_86 GPU (example engine)", upstream="ninfer-kits/example-engine",
        upstream_url="examples/engine", tracked_ref="main", revision=revision, version=version,
        arch="sm_86", cuda_version="13.0.88", host_compiler="g++ 14.2.0",
        cmake_version="3.31.6", cmake_options="-DCMAKE_BUILD_TYPE=Release",
        builder="local", toolchain="trixie-cuda130", base_image="none (built on the host)",
        base_image_digest="none", source_date_epoch=1700000000, pipeline_version="0.1.0",
        pipeline_revision="0" * 40, glibc_floor="2.34", sonames="libc.so.6", runpath="none",
        sass="sm_86", ptx="none",
        floor=(("x86-64 Linux, glibc ≥ 2.34", "highest versioned symbol referenced is "
                "GLIBC_2.34"),
               ("An NVIDIA GPU of compute capability 8.6 or a later 8.x", "SASS sm_86 | only")),
        licenses=("LICENSE", "NOTICE"), run=run)


def make_kit(dist: Path, program: Path, *, payload: bytes = b"", info: BuildInfo | None = None,
             tag: str = TAG, asset: str = ASSET, portable: bool = False,
             attested: bool = False, portable_readme: str = "",
             manifest: bool = False, owed: OwedSources | None = None,
             bundled: Sequence[Library] = (),
             licence_text: str = "Apache License 2.0 (test)\n") -> kitdir.KitDir:
    """A finished kit folder dist/<tag>/, made as the build makes one (pack, checksums,
    kitdir.install). `payload` adds a file to the tarball: another payload, another kit.
    `portable` adds the portable sibling <stem>-portable.tar.gz (see `portable_tree`), named
    in BUILDINFO.txt's portable_asset and listed in both checksum files. `attested` adds each
    tarball's SBOM and provenance (ninfer_kits.kit.attestations) as `build` does; without it the
    folder is a kit built before them. `portable_readme`: the portable kit's
    third_party/README, as the build writes it (none without). `manifest` packs each tarball
    as the build's pack stage does, with kit/MANIFEST.json (pack_kit); without it the kit is
    one packed before kits listed their files. `owed`: the kit's SOURCES.json, the Debian
    source packages it owes (a portable kit's, as the build records them). `bundled`: the
    portable kit's libraries instead of libbundled.so.1, with their licences in
    kit/third_party/licences.json, as the build writes them. `licence_text`: the upstream's
    LICENSE."""
    info = info or info_for()
    sibling = flavours.PORTABLE.asset(asset) if portable else None
    if sibling is not None:
        info = dataclasses.replace(info, flavour_assets=(("portable", sibling),))
    work = dist.parent / f".kit-work-{os.getpid()}-{len(payload)}-{hash(payload) & 0xffff}"
    shutil.rmtree(work, ignore_errors=True)
    tree = work / "kit"
    (tree / "bin").mkdir(parents=True)
    for name in ("ninfer", "ninfer-serve"):
        shutil.copy2(program, tree / "bin" / name)
    (tree / "LICENSE").write_text(licence_text)
    (tree / "NOTICE").write_text("test notice\n")
    if payload:
        (tree / "share").mkdir()
        (tree / "share" / "payload.bin").write_bytes(payload)
    (tree / kitdir.BUILDINFO).write_text(buildinfo.render(info, with_run=False))
    staging = work / "staging"
    staging.mkdir()
    pack = pack_kit if manifest else pack_tree
    tarball = pack(tree, staging / asset, mtime=info.source_date_epoch, threads=1)
    sha256s, sha1s = {asset: tarball.sha256}, {asset: tarball.sha1}
    documents = {}
    if attested:
        documents |= _documents(tree, asset, tarball.sha256, info)
    if sibling is not None:
        portable_tree(tree, info, bundled)
        if portable_readme:
            (tree / kitdir.PORTABLE_README.removeprefix("kit/")).write_text(portable_readme)
        packed = pack(tree, staging / sibling, mtime=info.source_date_epoch, threads=1)
        sha256s[sibling], sha1s[sibling] = packed.sha256, packed.sha1
        if attested:
            own = buildinfo.read(tree / kitdir.BUILDINFO)
            documents |= _documents(tree, sibling, packed.sha256, dataclasses.replace(
                own, run=info.run))
    for name, data in documents.items():
        sha256s[name] = write_file(staging / name, data).sha256
    written = write_file(staging / kitdir.BUILDINFO, buildinfo.render(info).encode())
    (staging / kitdir.BUILD_LOG).write_text("[1/1] Linking ninfer\n")
    if owed is not None:
        sha256s[kitdir.OWED] = write_file(staging / kitdir.OWED, owed_sources.render(owed)).sha256
    write_sha256sums(staging / kitdir.SHA256SUMS, {**sha256s, kitdir.BUILDINFO: written.sha256})
    write_sha1sums(staging / kitdir.SHA1SUMS, sha1s)
    dist.mkdir(parents=True, exist_ok=True)
    placed = kitdir.install(staging, dist, tag, info.kit)
    shutil.rmtree(work, ignore_errors=True)
    return placed


def release_sums(kit: kitdir.KitDir, pyz: bytes) -> bytes:
    """The SHA256SUMS a release of `kit` carries: the kit folder's lines, and a line for each
    file publish adds (SHA1SUMS, ninfer-kits.pyz of these bytes)."""
    lines = read_sha256sums(kit.path / kitdir.SHA256SUMS)
    lines[kitdir.SHA1SUMS] = hashlib.sha256((kit.path / kitdir.SHA1SUMS).read_bytes()).hexdigest()
    lines[kitdir.PYZ] = hashlib.sha256(pyz).hexdigest()
    return render_sums(lines).encode()


def _documents(tree: Path, asset: str, sha256: str, info: BuildInfo) -> dict[str, bytes]:
    """The SBOM and provenance of the tarball `asset` packed from `tree`, as `build` makes them."""
    texts = attestations.licence_texts(
        info, lambda path: (tree / path.removeprefix("kit/")).read_bytes())
    return attestations.documents(attestations.Subject(asset=asset, sha256=sha256), info, texts)


@functools.cache
def bundled_library() -> bytes:
    """A real shared library, libbundled.so.1 (what a portable kit carries in kit/lib/)."""
    with tempfile.TemporaryDirectory() as folder:
        source, library = Path(folder) / "bundled.c", Path(folder) / "libbundled.so.1"
        source.write_text("int bundled(void) { return 1; }\n")
        subprocess.run([tool("gcc"), "-O1", "-shared", "-fPIC", "-Wl,-soname,libbundled.so.1",
                        "-o", str(library), str(source)], check=True)
        return library.read_bytes()


@dataclasses.dataclass(frozen=True)
class Library:
    """A library a hand-made portable kit bundles (the bytes of `bundled_library()`)."""

    soname: str  # libavcodec.so.61
    origin: str  # "libavcodec61 7:7.1.5-0+deb13u1 (dpkg)"
    source: str  # the package data/copyleft.toml judges ("ffmpeg")
    licence: str  # its SPDX expression there ("GPL-2.0-or-later")
    name: str = ""  # a LicenseRef-…'s words


def portable_tree(tree: Path, info: BuildInfo, libraries: Sequence[Library] = ()) -> None:
    """Make the plain kit tree `tree` (kit/) its portable flavour, in place: kit/lib/ with one
    bundled library (or `libraries`, with kit/third_party/licences.json), its copyright file
    in kit/third_party/, and its own BUILDINFO.txt (flavour portable, a bundled line each)."""
    import hashlib

    (tree / "lib").mkdir(exist_ok=True)
    rows, licences = [], []
    for library in libraries or (Library("libbundled.so.1", "libbundled1 1.0-1 (dpkg)",
                                         "libbundled1", "MIT"),):
        package = library.origin.split()[0]
        (tree / "lib" / library.soname).write_bytes(bundled_library())
        notice = tree / "third_party" / package / "copyright"
        notice.parent.mkdir(parents=True, exist_ok=True)
        notice.write_text(f"Copyright: the bundled library's authors\nLicense: {library.licence}\n")
        rows.append((library.soname, hashlib.sha256(bundled_library()).hexdigest(),
                     library.origin, library.licence, f"kit/third_party/{package}/copyright"))
        licences.append(attestations.BundledLicence(soname=library.soname, package=library.source,
                                                    licence=library.licence, name=library.name))
    listed: tuple[str, ...] = ()
    if libraries:
        (tree / attestations.BUNDLED_LICENCES).write_bytes(
            attestations.bundled_licences_json(licences))
        listed = (f"kit/{attestations.BUNDLED_LICENCES}",)
    own = dataclasses.replace(info, flavour="portable", flavour_assets=(), bundled=tuple(rows),
                              licenses=(*info.licenses, *listed))
    (tree / kitdir.BUILDINFO).write_text(buildinfo.render(own, with_run=False))


def matrix_file(folder: Path, *, github: GitHubTarget | None = None,
                b2: B2Target | None = None, ledger: str = "commit",
                portable: bool = False, sources: str = "") -> Path:
    """The production matrix with a [publish] table of the test's own; its `example` kit is
    built portable only with `portable` (as the kit folder of the test is, or not); `sources`:
    a [publish.sources] table (tests/source_archive.sources_table)."""
    text = (ROOT / "matrix.toml").read_text()
    if not portable:
        text = text.replace("\nportable = true\n", "\n")
    text = text[: text.index("\n[publish]")] if "\n[publish]" in text else text
    table = [f'\n[publish]\nledger = "{ledger}"\n']
    if github is not None:
        table.append(f'\n[publish.github]\nrepository = "{github.repository}"\n'
                     f'api = "{github.api}"\n')
    if b2 is not None:
        table.append(f'\n[publish.b2]\nbucket = "{b2.bucket}"\nprefix = "{b2.prefix}"\n')
    path = folder / "matrix.toml"
    path.write_text(text + "".join(table) + sources)
    return path


def load(path: Path) -> Matrix:
    return load_matrix(path)


class Captured:
    """Every text a test sees: reporter output, messages, files; checked for a canary."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.reporter = Reporter(self.stream, mode="plain")
        self.texts: list[str] = []

    def add(self, *texts: object) -> None:
        self.texts += [str(text) for text in texts]

    def all(self) -> str:
        return "\n".join([self.stream.getvalue(), *self.texts])


def publish(kit_dir: Path, matrix: Matrix, stores: Iterable[Store], tmp: Path,
            reporter: Reporter, **options: Any) -> Outcome:
    request = PublishRequest(kit_dir=kit_dir, matrix=matrix, stores=tuple(stores),
                             lock_dir=tmp / "locks", ledger_dir=tmp / "releases", **options)
    return run_publish(request, reporter)


def github_store(server: Any, repository: str, token: str, reporter: Reporter,
                 retry: RetryPolicy = FAST, timeout: float = 5) -> Store:
    from ninfer_kits.publish.stores.github import GitHubStore

    target = GitHubTarget(repository=repository, api=server.base_url)
    return GitHubStore(target, Secret(token, "GITHUB_TOKEN"), retry=retry, reporter=reporter,
                       timeout=timeout)


def b2_simulator(raw_class: Any = None) -> tuple[Any, str, str]:
    """A b2sdk B2Api on its RawSimulator, with an account and the bucket `ninfer-kits`:
    (api, key id, key). The account's master key is replaced by one with a known value."""
    from b2sdk.v2 import B2Api, B2HttpApiConfig, InMemoryAccountInfo, RawSimulator

    api = B2Api(InMemoryAccountInfo(),
                api_config=B2HttpApiConfig(_raw_api_class=raw_class or RawSimulator))
    raw = api.session.raw_api
    key_id, key = raw.create_account()
    api.authorize_account("production", key_id, key)
    api.create_bucket("ninfer-kits", "allPrivate")
    return api, key_id, key


def b2_store(api: Any, key_id: str, key: str, reporter: Reporter, *,
             target: B2Target | None = None, retry: RetryPolicy = FAST) -> Store:
    from b2sdk.v2 import B2Api, B2HttpApiConfig, InMemoryAccountInfo

    from ninfer_kits.publish.stores.b2 import B2Store

    # A second B2Api on the same simulated service: what a new process would see.
    fresh = B2Api(InMemoryAccountInfo(),
                  api_config=B2HttpApiConfig(_raw_api_class=type(api.session.raw_api)))
    fresh.session.raw_api = api.session.raw_api
    return B2Store(target or B2Target(bucket="ninfer-kits", prefix="kits/"), key_id,
                   Secret(key, "B2_APPLICATION_KEY"), retry=retry, reporter=reporter, api=fresh)


def _cli_environment(env: dict[str, str] | None) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items()
               if key not in ("GITHUB_TOKEN", "GH_TOKEN", "B2_APPLICATION_KEY_ID",
                              "B2_APPLICATION_KEY", "NINFER_B2_ENV", "GITHUB_ACTIONS",
                              "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY",
                              "NINFER_KITS_SIGNING_KEY", "NINFER_KITS_SIGNING_KEY_FILE")}
    environ["NINFER_KITS_RETRY_SCALE"] = "0.001"
    environ.update(env or {})
    return environ


def cli(*args: str | Path, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`ninfer-kits ARGS` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *map(str, args)],
                          capture_output=True, text=True, env=_cli_environment(env), cwd=cwd,
                          timeout=120)


def cli_started(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`ninfer-kits ARGS` started in a fresh process, its stderr a pipe read as it comes."""
    return subprocess.Popen([sys.executable, "-m", "ninfer_kits", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=_cli_environment(env))


def with_info(kit: kitdir.KitDir, **changes: Any) -> BuildInfo:
    return dataclasses.replace(kit.info, **changes)
