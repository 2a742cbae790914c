"""Where a kit's release is, and each file's URL: the ledger, else the kit index, else the
matrix's templates and the GitHub API; on a store (its `stores` kind says how) or a dist-shaped
folder (docs/fetch.md, "Where the release is" and "Which tarball").
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

from ninfer_kits import stores
from ninfer_kits.config import resources, settings
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.fetch import ledger as ledger_mod
from ninfer_kits.fetch.http import Client, NotFound, shown
from ninfer_kits.fetch.identity import Request, check_located
from ninfer_kits.fetch.index import COMMITTED, IndexSource, index_location
from ninfer_kits.fetch.ledger import Recorded, url_of
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.kit import flavours
from ninfer_kits.kit.flavours import PLAIN, PORTABLE, FlavourKind
from ninfer_kits.kit.kitdir import REPRODUCTION, SIGNATURE, SOURCES, listed_sources
from ninfer_kits.matrix import DEFAULT_GITHUB_API, Kit, Matrix, UnresolvedPlaceholders
from ninfer_kits.net.remote import github_web, token_for
from ninfer_kits.release import ledger
from ninfer_kits.release.ledger import LedgerEntry

SHA256SUMS = "SHA256SUMS"
SHA1SUMS = "SHA1SUMS"
BUILDINFO = "BUILDINFO.txt"
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar")
OCTET_STREAM = "application/octet-stream"
B2_URL_ENV = settings.B2_URL.name
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
    origin: str  # the store's name ("github", "b2"), or "dir"
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
        """Every release the ledger or the kit index records, oldest first (--auto's choice)."""
        recorded = ledger.read_all(self.releases) if self.releases else []
        known = {entry.tag for entry in recorded}
        indexed = [entry for entry in (self.index.entries() if self.index else ())
                   if entry.tag not in known]
        return sorted([*recorded, *indexed], key=lambda entry: (entry.published_at, entry.tag))

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
        """The error for `what` found in no record: bad input, or the environment's (exit 3)
        when the kit index did not answer; `then` says what to do instead."""
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


def bundled_matrix() -> Path:
    """The matrix a zipapp carries (with the ledger as of its build, in releases/ beside it)."""
    return resources.BUNDLED / "matrix.toml"


def find_matrix(given: Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """--matrix, $NINFER_KITS_MATRIX, ./matrix.toml, else the zipapp's copy; None without."""
    from ninfer_kits.matrix import default_matrix_path

    if given is not None:
        return given
    env = os.environ if environ is None else environ
    path = default_matrix_path(env)
    if path.is_file() or settings.read(settings.MATRIX, env):
        return path
    bundled = bundled_matrix()
    return bundled if bundled.is_file() else None


def context(matrix_path: Path | None, *, repository: str | None = None,
            api: str | None = None, index: str | None = None) -> Context:
    """What locating reads; `index` where the kit index is (NO_INDEX: none)."""
    from ninfer_kits.matrix import load_matrix

    matrix = load_matrix(matrix_path) if matrix_path is not None else None
    github = matrix.publish.github if matrix is not None else None
    releases = matrix.path.parent / "releases" if matrix is not None else None
    repository = repository or (github.repository if github else None)
    api = (api or (github.api if github else DEFAULT_GITHUB_API)).rstrip("/")
    location = index_location(index, repository, github_web(api))
    return Context(
        matrix=matrix, releases=releases, repository=repository, api=api,
        index=IndexSource(location) if location else None,
    )


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


def locate(name: str, origin: str, ctx: Context, client: Client | None = None, *,
           flavour: str = PLAIN) -> Located:
    """The release `name` means on `origin` (a store or a folder), its `flavour` tarball the
    asset (BadInput when it has none)."""
    store = stores.origin(origin)
    if store is None and not (ctx.index is not None and ctx.index.loaded):
        ctx = dataclasses.replace(ctx, index=None)  # a folder says what it holds: no index
        # read for it (an index --auto chose from is kept: the request is its entry)
    want = wanted(name, ctx)
    kind = flavours.named(flavour)
    request = _request(want, ctx, kind)
    found = store.locate(want, ctx, client) if store is not None else \
        _folder(want, Path(origin))
    found = _flavoured(found, want, kind) if kind is not None else found
    check_located(request, found.asset, found.files, found.where)
    return dataclasses.replace(found, request=request)


def _request(want: Wanted, ctx: Context, kind: FlavourKind | None) -> Request:
    """What `want` asks for: the tarball, the kit, and what the record says of them."""
    record = want.entry
    asset = want.asset
    if kind is not None and asset is not None:
        recorded = record.entry.tarball_of(kind.name) if record else None
        asset = recorded.asset if recorded else _sibling_name(asset, kind)
    return Request(
        tag=want.tag, asset=asset, kit=_kit_id(want) or None,
        flavour=kind.name if kind is not None else PLAIN,
        revision=(record.entry.revision or None) if record else None,
        sha256=_recorded_sha256(record, asset), recorded_by=record.by if record else "",
        record=record.source if record else "", kits=ctx.matrix.kits if ctx.matrix else {})


def _recorded_sha256(record: Recorded | None, asset: str | None) -> str | None:
    if record is None or asset is None:
        return None
    listed = next((item.sha256 for item in record.assets if item.name == asset), None)
    if listed is None:
        listed = next((item.sha256 for item in record.entry.tarballs if item.asset == asset), None)
    return listed


def _flavoured(found: Located, want: Wanted, kind: FlavourKind) -> Located:
    """The same release with its tarball of flavour `kind` as the asset."""
    name = _sibling_name(found.asset, kind)
    if name is None or name not in found.files:
        listed = ", ".join(printable(file) for file in sorted(found.files)) or "no files"
        why = (f"kit {want.kit.id} is not built {kind.name} (no `{kind.switch} = true` in the "
               f"matrix)" if want.kit is not None and not kind.built_for(want.kit) else
               f"no {name or f'{kind.name} tarball'} among its files: {listed}")
        if found.ledger is not None and found.ledger.entry.tarball_of(kind.name) is None:
            why += f"; {found.ledger.source} records none"
        raise BadInput(f"release {found.tag} has no {kind.name} kit ({found.where}: {why}); "
                       f"leave out {' '.join(kind.fetch_option)} for the plain kit")
    return dataclasses.replace(found, asset=name,
                               notes=(*found.notes, f"the {kind.name} kit {name}"))


def _sibling_name(asset: str | None, kind: FlavourKind) -> str | None:
    try:
        return kind.asset(asset) if asset is not None else None
    except ValueError:  # not a .tar.gz: no other flavour's tarball is named after it
        return None


def _guessed(want: Wanted, asset: str) -> tuple[str, ...]:
    """The tarballs a release of `want` has by the matrix alone."""
    if want.kit is None:
        return (asset,)
    others = (_sibling_name(asset, kind) for kind in flavours.beside()
              if kind.built_for(want.kit))
    return (asset, *(name for name in others if name))


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


def github_release(want: Wanted, ctx: Context, client: Client | None) -> Located:
    """A release on GitHub: recorded URLs, else the URL pattern (kit-url), else the API's."""
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
    """Why a URL is made from the matrix's patterns: recorded nowhere, or not on `store`."""
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
    """Whether `name` is a plain file name (no '/', '.', '..' or empty) that shows as itself
    (no control character: messages print it)."""
    return bool(name) and name not in (".", "..") and "/" not in name and name.isprintable()


def b2_release(want: Wanted, ctx: Context, bucket: str | None, prefix: str) -> Located:
    """A release in B2: recorded URLs, else the friendly URLs on $NINFER_KITS_B2_URL's host."""
    where = f"B2 bucket {bucket or '?'}, {prefix}{want.tag}/"
    located = _from_entry(want, "b2", where)
    if located is not None:
        return located
    base = (settings.read(settings.B2_URL) or "").rstrip("/")
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
    folder = f"{base}/file/{bucket}/{_quote(prefix + want.tag)}"
    files = {name: RemoteFile(name, f"{folder}/{_quote(name)}")
             for name in (*_guessed(want, want.asset), SHA256SUMS, *_signature(ctx), SHA1SUMS,
                          BUILDINFO, REPRODUCTION)}
    return Located(want.tag, want.asset, "b2", where, files, kit=_kit_id(want), notes=want.notes)


def _unrecorded(ctx: Context, otherwise: BadInput, what: str, then: str) -> NinferKitsError:
    """`otherwise`, unless the kit index did not answer: then that (exit 3)."""
    if ctx.index is None or not ctx.index.failure:
        return otherwise
    return ctx.not_recorded(what, then)


def _signature(ctx: Context) -> tuple[str, ...]:
    """SHA256SUMS.sig among the guessed files, where the matrix says releases are signed."""
    return (SIGNATURE,) if ctx.matrix is not None and ctx.matrix.publish.signing else ()


def _folder(want: Wanted, root: Path) -> Located:
    if not root.is_dir():
        raise BadInput(f"--from {root}: not a folder (give "
                       f"{stores.origin_words('a folder shaped like dist/')})")
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
    """The one kit tarball among `files` for a tag nothing names the tarball of (identity then
    binds it through the matrix): other flavours' and the copyleft sources aside (`sums` read
    only when the names leave more than one)."""
    found = [name for name in files if name.endswith(TARBALL_SUFFIXES)]
    siblings = {_sibling_name(name, kind) for name in found for kind in flavours.beside()}
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


def origins_help() -> str:
    """--from's help: each store users fetch from (the first the default), or a folder."""
    words = [kind.origin.words for kind in stores.origins() if kind.origin is not None]
    words[0] += " (default)"
    return (f"where to fetch from: {', '.join(words)}, or a folder shaped like dist/ "
            f"(DIR/<tag>/ or the tag's folder itself)")


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
                             f"(default: ${settings.INDEX.name}, else the GitHub repository's "
                             f"{COMMITTED}); `none`: read none (the matrix's names then)")


def offline_context(args: argparse.Namespace) -> Context:
    return context(find_matrix(args.matrix), repository=args.repository, api=args.api,
                   index=args.index)


def client_for(args: argparse.Namespace) -> tuple[Client, Context]:
    ctx = offline_context(args)
    token = token_for(ctx.api, "--api" if args.api else "")
    named = (ctx.api, ctx.index.location if ctx.index else "", settings.read(settings.B2_URL) or "")
    return Client(token=token.value if token else None, token_hosts=(ctx.api,),
                  servers=named), ctx


def located(args: argparse.Namespace, ctx: Context, client: Client | None,
            origin: str) -> Located:
    if stores.origin(origin) is None and not Path(origin).is_dir():
        raise BadInput(f"--from {origin}: not {stores.origin_words('a folder')}")
    return locate(args.name, origin, ctx, client, flavour=flavour_asked(args))


def flavour_asked(args: argparse.Namespace) -> str:
    """--flavour NAME (fetch's) or --portable."""
    named: str | None = getattr(args, "flavour", None)
    return named or (PORTABLE.name if args.portable else PLAIN)
