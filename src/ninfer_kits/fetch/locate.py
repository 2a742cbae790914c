"""Where a kit's release is, and the URL of each of its files.

A name is a kit of the matrix or a release tag. The ledger (`releases/<tag>.toml` beside the
matrix) says what was published, with every asset's size, hashes and URLs; without it, the
matrix's tag and asset templates and the GitHub API (the release by tag) say it. A kit whose tag
needs facts only a build knows (`{version}`: the upstream's VERSION file) is found through the
ledger's newest release of it.

Origins: `github` (the release download URLs, or the API's asset URLs with a token), `b2` (the
bucket's friendly URLs `<download host>/file/<bucket>/<prefix><tag>/<asset>`), or a folder on
this machine shaped like dist/ (`DIR/<tag>/` or the tag's folder itself: what `build`, `publish
--dry-run` and the local store write).

A release of a kit built `portable` has a second tarball, `<stem>-portable.tar.gz`; `portable=`
(fetch and kit-url --portable) makes it the asset located, and refuses a release without one.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ninfer_kits import ledger, resources
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.fetch import ledger as ledger_mod
from ninfer_kits.fetch.http import Client, NotFound, shown
from ninfer_kits.fetch.identity import PLAIN, Request, check_located
from ninfer_kits.fetch.index import COMMITTED, INDEX_ENV, IndexSource, index_location
from ninfer_kits.fetch.ledger import Recorded, url_of
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.kitdir import (
    PORTABLE,
    REPRODUCTION,
    SIBLINGS,
    SIGNATURE,
    SOURCES,
    FlavourKind,
    listed_sources,
)
from ninfer_kits.ledger import LedgerEntry
from ninfer_kits.matrix import DEFAULT_GITHUB_API, Kit, Matrix, UnresolvedPlaceholders
from ninfer_kits.remote import github_web, token_for

SHA256SUMS = "SHA256SUMS"
SHA1SUMS = "SHA1SUMS"
BUILDINFO = "BUILDINFO.txt"
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar")
OCTET_STREAM = "application/octet-stream"
B2_URL_ENV = "NINFER_KITS_B2_URL"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class RemoteFile:
    """One file of a release: where to get it and what is recorded about it."""

    name: str
    url: str  # what is fetched (an http(s) URL, or a path for a folder)
    accept: str | None = None  # the API's asset URLs need Accept: application/octet-stream
    size: int | None = None
    sha256: str | None = None  # recorded elsewhere than SHA256SUMS (ledger, the API's digest)
    sha1: str | None = None  # recorded in the ledger
    recorded_by: str = ""  # where sha256 comes from, for messages
    sha1_by: str = "the ledger"  # where sha1 comes from


@dataclass(frozen=True)
class Located:
    tag: str
    asset: str  # the kit tarball's name
    origin: str  # "github", "b2" or "dir"
    where: str  # for messages: "GitHub OWNER/NAME release TAG"
    files: Mapping[str, RemoteFile]  # those the release has, by name
    kit: str | None = None
    ledger: Recorded | None = None
    notes: tuple[str, ...] = field(default=())
    request: Request | None = None  # what was asked for (locate states it; fetch checks it)

    @property
    def tarball(self) -> RemoteFile:
        return self.files[self.asset]


@dataclass(frozen=True)
class Context:
    """What locating reads: the matrix (if any), the ledger folder, the GitHub target."""

    matrix: Matrix | None
    releases: Path | None  # the ledger folder
    repository: str | None
    api: str
    b2_bucket: str | None
    b2_prefix: str
    index: IndexSource | None = None  # read when a name is not in the ledger

    def recorded(self, tag: str) -> Recorded | None:
        """The release `tag` as the ledger records it, else as the kit index does."""
        entry = ledger_mod.read_entry(self.releases, tag) if self.releases else None
        if entry is None and self.index is not None:
            entry = self.index.entry(tag)
        return entry

    def recorded_of(self, kit: str) -> list[Recorded]:
        """Every release of `kit`, oldest first: the ledger's, else the kit index's."""
        entries = ledger_mod.entries_of(self.releases, kit) if self.releases else []
        if not entries and self.index is not None:
            entries = self.index.entries_of(kit)
        return entries

    def every_release(self) -> list[LedgerEntry]:
        """Every release the ledger here or the kit index records (the ledger's entry where
        both do), oldest first: fetch --auto's candidates."""
        recorded = ledger.read_all(self.releases) if self.releases else []
        known = {entry.tag for entry in recorded}
        indexed = [entry for entry in (self.index.entries() if self.index else ())
                   if entry.tag not in known]
        return sorted([*recorded, *indexed], key=lambda entry: (entry.published_at, entry.tag))

    @property
    def index_note(self) -> str:
        """Why the kit index told nothing, when it was asked and had nothing to tell."""
        return self.index.note if self.index is not None else ""

    @property
    def ledger_words(self) -> str:
        if self.releases is None:
            return "no ledger here"
        if self.releases.parent == resources.BUNDLED:
            return "the ledger inside ninfer-kits.pyz, as of its build"
        return str(self.releases)

    @property
    def recorded_words(self) -> str:
        """Where releases are looked up, for a message that none was found."""
        if self.index is None:
            return f"the ledger ({self.ledger_words})"
        note = f" ({self.index.note})" if self.index.note else ""
        return f"the ledger ({self.ledger_words}) or {self.index.words}{note}"

    def not_recorded(self, what: str, then: str) -> NinferKitsError:
        """The error for `what` ("kit X has no release") found in no record: bad input when
        every place looked in answered; the environment's (exit 3) when the kit index, which
        may record it, did not answer (the network, the server), then said as such. `then`
        is what to do instead."""
        failure = self.index.failure if self.index is not None else ""
        if not failure:
            return BadInput(f"{what} in {self.recorded_words}: {then}")
        assert self.index is not None
        return EnvironmentFailure(
            f"{what} in the ledger ({self.ledger_words}), and {self.index.words}, which may "
            f"record it, did not answer ({failure}): try again when it can be reached, or "
            f"{then}")

    @property
    def web(self) -> str:
        return github_web(self.api)


# --------------------------------------------------------------------------- the matrix


def bundled_matrix() -> Path:
    """The matrix a zipapp carries (with the ledger as of its build, in releases/ beside it)."""
    return resources.BUNDLED / "matrix.toml"


def find_matrix(given: Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """--matrix, $NINFER_KITS_MATRIX, ./matrix.toml, else the zipapp's own copy; None when
    there is none (a wheel installed elsewhere: name a tag and --repository)."""
    from ninfer_kits.matrix import default_matrix_path

    if given is not None:
        return given
    env = os.environ if environ is None else environ
    path = default_matrix_path(env)
    if path.is_file() or env.get("NINFER_KITS_MATRIX"):
        return path
    bundled = bundled_matrix()
    return bundled if bundled.is_file() else None


def context(matrix_path: Path | None, *, repository: str | None = None,
            api: str | None = None, index: str | None = None) -> Context:
    """What locating reads; `index` (a URL or file) where the kit index is, when not where
    fetch.index finds it, or NO_INDEX: none."""
    from ninfer_kits.matrix import load_matrix

    matrix = load_matrix(matrix_path) if matrix_path is not None else None
    github = matrix.publish.github if matrix is not None else None
    b2 = matrix.publish.b2 if matrix is not None else None
    releases = matrix.path.parent / "releases" if matrix is not None else None
    repository = repository or (github.repository if github else None)
    api = (api or (github.api if github else DEFAULT_GITHUB_API)).rstrip("/")
    location = index_location(index, repository, github_web(api))
    return Context(
        matrix=matrix, releases=releases, repository=repository, api=api,
        b2_bucket=b2.bucket if b2 else None, b2_prefix=b2.prefix if b2 else "",
        index=IndexSource(location) if location else None,
    )


# --------------------------------------------------------------------------- name → tag


@dataclass(frozen=True)
class Wanted:
    """What the user named, made into a tag (and the kit, the ledger entry when known)."""

    tag: str
    kit: Kit | None
    asset: str | None  # rendered from the matrix, when it renders
    entry: Recorded | None
    notes: tuple[str, ...] = ()


def wanted(name: str, ctx: Context) -> Wanted:
    """The release `name` (a kit or a tag) means."""
    kit = ctx.matrix.kits.get(name) if ctx.matrix is not None else None
    if kit is None:
        entry = ctx.recorded(name)
        return Wanted(tag=name, kit=_kit_of(ctx, entry), asset=entry.asset if entry else None,
                      entry=entry)
    try:
        tag = kit.render_tag()
        asset = kit.render_asset()
    except UnresolvedPlaceholders as error:
        return _from_ledger(kit, ctx, error)
    entry = ctx.recorded(tag)
    return Wanted(tag=tag, kit=kit, asset=entry.asset if entry else asset, entry=entry)


def _kit_of(ctx: Context, entry: Recorded | None) -> Kit | None:
    if entry is None or ctx.matrix is None or not entry.kit:
        return None
    return ctx.matrix.kits.get(entry.kit)


def _from_ledger(kit: Kit, ctx: Context, error: UnresolvedPlaceholders) -> Wanted:
    needs = ", ".join(f"{{{name}}}" for name in error.names)
    entries = ctx.recorded_of(kit.id)
    if not entries:
        raise ctx.not_recorded(f"kit {kit.id}: its tag {kit.tag!r} needs {needs}, which only "
                               f"a build of it knows; there is no release of it",
                               "name the release's tag instead of the kit")
    newest = entries[-1]
    note = (f"kit {kit.id}: its tag {kit.tag!r} needs {needs}, known after a build; the "
            f"newest release of it is {newest.tag} ({newest.source})")
    return Wanted(tag=newest.tag, kit=kit, asset=newest.asset, entry=newest, notes=(note,))


# --------------------------------------------------------------------------- per origin


def locate(name: str, origin: str, ctx: Context, client: Client | None = None, *,
           portable: bool = False) -> Located:
    """The release `name` means on `origin` ("github", "b2" or a folder's path); with
    `portable`, its portable tarball is the asset (BadInput when the release has none)."""
    if origin not in ("github", "b2") and not (ctx.index is not None and ctx.index.loaded):
        ctx = dataclasses.replace(ctx, index=None)  # a folder says what it holds: no index
        # read for it (one --auto chose from is kept: the request is that index's entry)
    want = wanted(name, ctx)
    request = _request(want, ctx, portable)
    if origin == "github":
        found = _github(want, ctx, client)
    elif origin == "b2":
        found = _b2(want, ctx)
    else:
        found = _folder(want, Path(origin))
    found = _portable(found, want) if portable else found
    check_located(request, found.asset, found.files, found.where)
    return dataclasses.replace(found, request=request)


def _request(want: Wanted, ctx: Context, portable: bool) -> Request:
    """What `want` asks for: the tarball by name, the kit, and what the record (ledger or kit
    index) says of them."""
    record = want.entry
    asset = want.asset
    if portable and asset is not None:
        asset = record.portable_asset if record and record.portable_asset else \
            _sibling_name(asset)
    return Request(
        tag=want.tag, asset=asset, kit=_kit_id(want) or None,
        flavour=PORTABLE.name if portable else PLAIN,
        revision=(record.entry.revision or None) if record else None,
        sha256=_recorded_sha256(record, asset), recorded_by=record.by if record else "",
        record=record.source if record else "", kits=ctx.matrix.kits if ctx.matrix else {})


def _recorded_sha256(record: Recorded | None, asset: str | None) -> str | None:
    if record is None or asset is None:
        return None
    listed = next((item.sha256 for item in record.assets if item.name == asset), None)
    if listed is None and asset == record.portable_asset:
        listed = record.entry.portable_sha256
    return listed


def _portable(found: Located, want: Wanted) -> Located:
    """The same release with its portable tarball as the asset."""
    name = _sibling_name(found.asset)
    if name is None or name not in found.files:
        listed = ", ".join(printable(file) for file in sorted(found.files)) or "no files"
        why = (f"kit {want.kit.id} is not built portable (no `portable = true` in the matrix)"
               if want.kit is not None and not want.kit.portable else
               f"no {name or 'portable tarball'} among its files: {listed}")
        if found.ledger is not None and found.ledger.portable_asset is None:
            why += f"; {found.ledger.source} records none"
        raise BadInput(f"release {found.tag} has no portable kit ({found.where}: {why}); "
                       f"leave out --portable for the plain kit")
    return dataclasses.replace(found, asset=name,
                               notes=(*found.notes, f"the portable kit {name}"))


def _sibling_name(asset: str | None, kind: FlavourKind = PORTABLE) -> str | None:
    try:
        return kind.asset(asset) if asset is not None else None
    except ValueError:  # not a .tar.gz: a release with no sibling's name
        return None


def _guessed(want: Wanted, asset: str) -> tuple[str, ...]:
    """The tarballs a release of `want` has by the matrix alone: the kit's, and its portable
    sibling when the matrix builds one."""
    sibling = _sibling_name(asset) if want.kit is not None and want.kit.portable else None
    return (asset, sibling) if sibling else (asset,)


def _from_entry(want: Wanted, store: str, where: str) -> Located | None:
    entry = want.entry
    if entry is None:
        return None
    files: dict[str, RemoteFile] = {}
    for asset in entry.assets:
        if not plain_file_name(asset.name):  # the kit index comes from elsewhere: never a path
            raise BadInput(f"{entry.source}: release {entry.tag} names an asset "
                           f"{printable(asset.name)}: not a plain file name; refused")
        url = url_of(asset, store)
        if url:
            files[asset.name] = RemoteFile(asset.name, url, size=asset.size, sha256=asset.sha256,
                                           sha1=asset.sha1, recorded_by=entry.by,
                                           sha1_by=entry.by)
    if entry.asset not in files:
        return None
    return Located(want.tag, entry.asset, store, where, files, kit=entry.kit, ledger=entry,
                   notes=(*want.notes, f"the release as {entry.source} records it"))


def _github(want: Wanted, ctx: Context, client: Client | None) -> Located:
    repository = ctx.repository or (want.entry.repository if want.entry else None)
    where = f"GitHub {repository or '?'} release {want.tag}"
    located = _from_entry(want, "github", where)
    if located is not None and not (client is not None and client.has_token):
        return located
    if repository is None:
        raise BadInput("no GitHub repository to fetch from: the matrix has no "
                       "[publish.github] repository; give --repository OWNER/NAME")
    if client is None:  # kit-url: no network; the release's download URLs by their pattern
        if want.asset is None:
            raise _unrecorded(ctx, BadInput(
                f"{want.tag}: the asset's name is not known without the ledger or the GitHub "
                f"API (fetch finds it)"), f"there is no record of release {want.tag}'s kit "
                f"tarball", "let fetch find it through the GitHub API")
        base = f"{ctx.web}/{repository}/releases/download/{_quote(want.tag)}"
        files = {name: RemoteFile(name, f"{base}/{_quote(name)}")
                 for name in (*_guessed(want, want.asset), SHA256SUMS, BUILDINFO,
                              REPRODUCTION)}
        note = _unrecorded_note(want, ctx, "GitHub")
        return Located(want.tag, want.asset, "github", where, files, kit=_kit_id(want),
                       notes=(*want.notes, note))
    return _github_api(want, ctx, client, repository, where, located)


def _unrecorded_note(want: Wanted, ctx: Context, store: str) -> str:
    """Why a URL is made from the matrix's patterns: the release is recorded nowhere, or
    recorded as published elsewhere only (a local folder), not to `store`."""
    pattern = "the URL follows from the matrix's tag and asset"
    entry = want.entry
    if entry is None:
        return (f"{want.tag} is not in {ctx.recorded_words}: {pattern}; it answers once that "
                f"release is published")
    stores = ", ".join(sorted({item.name for item in entry.entry.stores})) or "no store"
    return (f"{want.tag} is recorded in {entry.source} as published to {stores}, not to "
            f"{store}: {pattern}; it answers once that release is published to {store}")


def _github_api(want: Wanted, ctx: Context, client: Client, repository: str, where: str,
                recorded: Located | None) -> Located:
    url = f"{ctx.api}/repos/{repository}/releases/tags/{_quote(want.tag)}"
    try:
        release = client.get_json(url)
    except NotFound:
        kit = f" (kit {want.kit.id})" if want.kit else ""
        raise BadInput(f"GitHub {repository} has no published release {want.tag}{kit} "
                       f"({shown(url)}: 404)") from None
    assets = release.get("assets") if isinstance(release, dict) else None
    if not isinstance(assets, list):
        raise BadInput(f"{shown(url)}: not a release (no assets list)")
    use_api = client.has_token
    files: dict[str, RemoteFile] = {}
    for asset in assets:
        if not isinstance(asset, dict) or asset.get("state", "uploaded") != "uploaded":
            continue
        name = str(asset.get("name", ""))
        if name and not plain_file_name(name):
            raise BadInput(f"{shown(url)}: an asset named {printable(name)}: not a plain file "
                           f"name (a path, '.', '..' or a control character): refused")
        link = asset.get("url") if use_api else asset.get("browser_download_url")
        if not name or not isinstance(link, str):
            continue
        sha256 = _digest(asset.get("digest"), name, url)
        size = asset.get("size") if isinstance(asset.get("size"), int) else None
        old = recorded.files.get(name) if recorded else None
        files[name] = RemoteFile(name, link, accept=OCTET_STREAM if use_api else None, size=size,
                                 sha256=sha256 if sha256 else (old.sha256 if old else None),
                                 sha1=old.sha1 if old else None,
                                 recorded_by="GitHub's digest" if sha256 else
                                 (old.recorded_by if old else ""))
    sums = files.get(SHA256SUMS)
    asset = want.asset or _only_tarball(
        files, where, sums=None if sums is None else
        lambda: client.get_bytes(sums.url, accept=sums.accept).decode("utf-8", "replace"))
    entry = recorded.ledger if recorded else want.entry
    return Located(want.tag, asset, "github", where, files, kit=_kit_id(want), ledger=entry,
                   notes=(*want.notes, f"the release from {shown(url)}"))


def _digest(digest: object, name: str, url: str) -> str | None:
    """The sha256 of GitHub's asset `digest` (`sha256:<hex>`), None without one."""
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        return None
    if _SHA256.fullmatch(digest[7:]) is None:
        raise BadInput(f"{shown(url)}: asset {name}: the digest {printable(digest[:80])} is not "
                       f"a sha256: refused")
    return digest[7:].lower()


def plain_file_name(name: str) -> bool:
    """Whether `name` names a file in the folder it is joined to, and nothing else: no '/',
    not '.' or '..', not empty; and shows as itself: no control character (no NUL, no escape
    sequence for the terminal that every message naming the asset would print)."""
    return bool(name) and name not in (".", "..") and "/" not in name and name.isprintable()


def _b2(want: Wanted, ctx: Context) -> Located:
    bucket = ctx.b2_bucket
    where = f"B2 bucket {bucket or '?'}, {ctx.b2_prefix}{want.tag}/"
    located = _from_entry(want, "b2", where)
    if located is not None:
        return located
    base = os.environ.get(B2_URL_ENV, "").rstrip("/")
    if bucket is None:
        raise BadInput("no B2 bucket to fetch from: the matrix has no [publish.b2] bucket")
    if want.asset is None:  # before the host: with $NINFER_KITS_B2_URL it is still unknown
        raise _unrecorded(ctx, BadInput(
            f"{want.tag}: the asset's name is not known without the ledger; name a kit of the "
            f"matrix, or use --from github"), f"there is no record of release {want.tag}'s "
            f"kit tarball", "use --from github")
    if not base:
        raise _unrecorded(ctx, BadInput(
            f"the B2 download host of bucket {bucket} is recorded in the ledger "
            f"(releases/{want.tag}.toml), which is not here: set {B2_URL_ENV} to the account's "
            f"download URL (https://f00N.backblazeb2.com), or use --from github"),
            f"there is no record of release {want.tag}'s B2 download host",
            f"set {B2_URL_ENV} to the account's download URL (https://f00N.backblazeb2.com)")
    folder = f"{base}/file/{bucket}/{_quote(ctx.b2_prefix + want.tag)}"
    files = {name: RemoteFile(name, f"{folder}/{_quote(name)}")
             for name in (*_guessed(want, want.asset), SHA256SUMS, *_signature(ctx), SHA1SUMS,
                          BUILDINFO, REPRODUCTION)}
    return Located(want.tag, want.asset, "b2", where, files, kit=_kit_id(want), notes=want.notes)


def _unrecorded(ctx: Context, otherwise: BadInput, what: str, then: str) -> NinferKitsError:
    """`otherwise`, unless the kit index, which would have said what is missing, did not
    answer: then that (exit 3), as Context.not_recorded says it."""
    if ctx.index is None or not ctx.index.failure:
        return otherwise
    return ctx.not_recorded(what, then)


def _signature(ctx: Context) -> tuple[str, ...]:
    """SHA256SUMS.sig among the files guessed without a listing, where the matrix says
    releases are signed (an unsigned release has none to list)."""
    return (SIGNATURE,) if ctx.matrix is not None and ctx.matrix.publish.signing else ()


def _folder(want: Wanted, root: Path) -> Located:
    if not root.is_dir():
        raise BadInput(f"--from {root}: not a folder (give github, b2 or a folder shaped like "
                       f"dist/)")
    candidates = [root / want.tag, root]
    folder = next((c for c in candidates if (c / SHA256SUMS).is_file()), None)
    if folder is None:
        raise BadInput(f"{root}: neither {root / want.tag}/ nor {root}/ holds a release "
                       f"({SHA256SUMS} and the kit tarball)")
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    files = {name: RemoteFile(name, str(folder / name), size=(folder / name).stat().st_size)
             for name in names}
    asset = want.asset if want.asset is not None else _only_tarball(
        files, str(folder), sums=lambda: (folder / SHA256SUMS).read_text("utf-8", "replace"))
    return Located(want.tag, asset, "dir", f"folder {folder}", files, kit=_kit_id(want),
                   ledger=want.entry, notes=want.notes)


def _only_tarball(files: Mapping[str, Any], where: str,
                  sums: Callable[[], str] | None = None) -> str:
    """The one kit tarball among `files`, for a tag that neither the matrix nor a record names
    the tarball of (never in place of a named one: fetch.identity binds what it unpacks to the
    tag through the matrix): its siblings (the portable one) aside, and the copyleft sources
    published beside it (`sums` reads the release's SHA256SUMS, which lists them as
    sources/<file>; read only when the names leave more than one)."""
    found = [name for name in files if name.endswith(TARBALL_SUFFIXES)]
    siblings = {_sibling_name(name, kind) for name in found for kind in SIBLINGS}
    tarballs = [name for name in found if name not in siblings]
    if len(tarballs) > 1 and sums is not None:
        sources = {name.removeprefix(f"{SOURCES}/") for name in listed_sources(sums())}
        tarballs = [name for name in tarballs if name not in sources]
    if len(tarballs) != 1:
        listed = ", ".join(printable(name) for name in sorted(files)) or "no files"
        raise BadInput(f"{where}: expected one kit tarball, found {len(tarballs)} ({listed})")
    return tarballs[0]


def _kit_id(want: Wanted) -> str | None:
    if want.kit is not None:
        return want.kit.id
    return want.entry.kit if want.entry else None


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="/-_.~+")


# --------------------------------------------------------------------------- the commands' side

ORIGINS_HELP = ("where to fetch from: the GitHub release (default), B2's friendly URLs, or a "
                "folder shaped like dist/ (DIR/<tag>/ or the tag's folder itself)")


def add_location_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", metavar="PATH", type=Path, default=None,
                        help="the matrix file, with releases/ beside it (default: "
                             "$NINFER_KITS_MATRIX, else ./matrix.toml, else the copy inside "
                             "ninfer-kits.pyz)")
    parser.add_argument("--repository", metavar="OWNER/NAME", default=None,
                        help="the GitHub repository of the releases (default: the matrix's "
                             "[publish.github] repository)")
    parser.add_argument("--api", metavar="URL", default=None,
                        help="the GitHub REST API's base URL (default: the matrix's, else "
                             f"{DEFAULT_GITHUB_API})")
    parser.add_argument("--index", metavar="URL|FILE|none", default=None,
                        help=f"the kit index, read for a release the ledger does not record "
                             f"(default: ${INDEX_ENV}, else the GitHub repository's "
                             f"{COMMITTED}); `none`: read none (the matrix's names then)")


def offline_context(args: argparse.Namespace) -> Context:
    return context(find_matrix(args.matrix), repository=args.repository, api=args.api,
                   index=args.index)


def client_for(args: argparse.Namespace) -> tuple[Client, Context]:
    ctx = offline_context(args)
    token = token_for(ctx.api, "--api" if args.api else "")
    named = (ctx.api, ctx.index.location if ctx.index else "", os.environ.get(B2_URL_ENV, ""))
    return Client(token=token.value if token else None, token_hosts=(ctx.api,),
                  servers=named), ctx


def located(args: argparse.Namespace, ctx: Context, client: Client | None,
            origin: str) -> Located:
    if origin not in ("github", "b2") and not Path(origin).is_dir():
        raise BadInput(f"--from {origin}: not github, b2 or a folder")
    return locate(args.name, origin, ctx, client, portable=args.portable)
