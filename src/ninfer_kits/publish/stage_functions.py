"""What each stage of the publish does (docs/publish.md lists them in order): each takes the
Outcome so far and returns it with its own result added."""

from __future__ import annotations

import dataclasses
import datetime
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits import stores as store_kinds
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure, need
from ninfer_kits.files import locks
from ninfer_kits.files.atomic import hash_file, write_file
from ninfer_kits.kit import kitdir, licence_policy, owed_sources
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.publish import needs, plan, sources
from ninfer_kits.publish.holdings import (
    held_release,
    inspect_each,
    refuse_conflicts,
    refuse_other_kit,
    reproducing_store,
    upload_missing,
)
from ninfer_kits.publish.state import Outcome
from ninfer_kits.publish.store import Asset, Presence, Release, Store, StoreRecord
from ninfer_kits.release import kitindex, ledger, reproduction, signatures
from ninfer_kits.release.checksums import SHA256, parse_sums, render_sums


def read_kit(state: Outcome, reporter: Reporter) -> Outcome:
    """Read dist/<tag>/ (plan.read_kit)."""
    request = state.request
    limits = [(store.describe(), store.max_asset_size) for store in request.stores]
    read = plan.read_kit(request.kit_dir, request.matrix, limits)
    refuse_withheld_sources(read)
    return dataclasses.replace(state, read=read)


class SourcesNotFetched(BadInput):
    """A portable kit built without its copyleft sources: their licences forbid shipping it."""


def refuse_withheld_sources(kit: KitDir) -> None:
    """Refuse a portable kit whose build skipped the copyleft sources: its debt is unknown."""
    if not kit.sources and kit.owed is None and kitdir.sources_not_fetched(kit):
        portable = need(kit.portable, "portable")
        raise SourcesNotFetched(
            f"{portable.path}: built by an older ninfer-kits with NINFER_KITS_NO_SOURCES=1, so "
            f"the GPL, LGPL and MPL libraries it carries come without their source, and the kit "
            f"folder has no {kitdir.OWED} that says which source packages to fetch; nothing "
            f"was published. Build the kit again with this ninfer-kits (it records what the "
            f"kit owes, and publish fetches it)")


def fetch_sources(state: Outcome, reporter: Reporter) -> Outcome:
    """The Debian sources the kit owes, cached or fetched; a dry run stays offline."""
    request, kit = state.request, state.kit
    if kit.owed_record is None:
        return state
    record = owed_sources.read(kit.owed_record)
    if request.dry_run:
        reporter.info(f"{kitdir.OWED}: the kit owes {len(record.packages)} Debian source "
                      f"packages; a publish fetches them (not a dry run: it stays offline): "
                      + ", ".join(f"{p.name} {p.version}" for p in record.packages))
        return state
    files = sources.fetch_owed(record, request.matrix.publish.sources,
                               request.lock_dir.parent, reporter.info)
    held = {name.removeprefix(f"{kitdir.SOURCES}/"): name for name in kit.sources}
    sums = parse_sums((kit.path / kitdir.SHA256SUMS).read_text(encoding="utf-8"), SHA256,
                      str(kit.path / kitdir.SHA256SUMS))
    assets = []
    for item in files:
        if item.name in held and sums.get(held[item.name]) != item.sha256:
            raise sources.SourceMismatch(
                f"{kit.path / kitdir.SHA256SUMS} lists {held[item.name]} as "
                f"{sums.get(held[item.name])}; the archive's file is {item.sha256}")
        assets.append(Asset(name=item.name, path=item.path, size=item.size, sha256=item.sha256,
                            sha1=hash_file(item.path).sha1, content_type=plan.SOURCE_TYPE))
    megabytes = sum(item.size for item in files) / 1e6
    reporter.info(f"sources: {len(record.packages)} source packages, {len(files)} files, "
                  f"{megabytes:.1f} MB, published as assets of the release")
    return dataclasses.replace(state, sources=tuple(assets))


def judge_needs(state: Outcome, reporter: Reporter) -> Outcome:
    """What each tarball's ELF files need, and where that is met (publish.needs)."""
    judged = needs.judge(state.kit)
    for flavour in judged.flavours:
        reporter.info(f"{flavour.asset}: runs on {', '.join(flavour.meets or ()) or 'none'} "
                      f"of the known distributions (facts of {judged.distributions_as_of})")
    return dataclasses.replace(state, judged=judged)


def judge_licences(state: Outcome, reporter: Reporter) -> Outcome:
    """Each tarball's SBOM against the licence policy: refused where the store distributes
    (GitHub, B2); a WARNING and a notes line to a folder or in a dry run."""
    verdicts = licence_policy.judge_kit(state.kit)
    forbidden = [verdict for verdict in verdicts if verdict.status == licence_policy.FORBIDDEN]
    for verdict in verdicts:
        if verdict not in forbidden:
            reporter.info(verdict.line())
    distributing = store_kinds.distributing(store.name for store in state.request.stores)
    if forbidden and distributing:
        raise licence_policy.LicenceForbidden(
            "\n".join(verdict.details() for verdict in forbidden) +
            f"\nnothing was published to {' or '.join(distributing)} "
            f"(the licence policy: {licence_policy.DATA_FILE.name}, docs/publish.md)")
    where = ("a dry run: a publish to GitHub or B2 would refuse it" if state.request.dry_run
             else "published to a folder only")
    for verdict in forbidden:
        reporter.warning(f"{verdict.details()}\n{where}: this release must not be distributed "
                         "(its notes say so)")
    return dataclasses.replace(state, licences=verdicts)


def lock(state: Outcome, reporter: Reporter) -> Outcome:
    """One publish of a tag at a time on this machine, its scratch folder held to the end."""
    request, kit = state.request, state.kit
    state.held.enter_context(held_lock(request.lock_dir, kit.tag, request.wait, reporter))
    scratch = state.held.enter_context(
        tempfile.TemporaryDirectory(prefix=".reproduced-", dir=request.lock_dir))
    return dataclasses.replace(state, scratch=Path(scratch))


def preflight(state: Outcome, reporter: Reporter) -> Outcome:
    """Each store: the credentials work and can write the target."""
    for store in state.request.stores:
        store.preflight()
        reporter.info(f"{store.describe()}: ready, can write")
    return state


class ReproductionMismatch(BadInput):
    """The reproduction record handed to publish is of another kit, tag or build."""


def record_reproduction(state: Outcome, reporter: Reporter) -> Outcome:
    """With --reproduction: refuse a record of another kit, tag or tarball, then put its bytes
    in scratch for SHA256SUMS to list. A `differs` or `failed` record is published too: the
    release is the build job's kit; the record tells what the second build found."""
    request, kit = state.request, state.kit
    path = need(request.reproduction, "reproduction")
    data = _read_record(path)
    record = reproduction.parse(data, str(path))
    tarballs = {flavour.asset: flavour.sha256 for flavour in kit.flavours}
    if (record.kit, record.tag) != (kit.kit, kit.tag):
        raise ReproductionMismatch(f"{path}: a reproduction of kit {record.kit} ({record.tag}), "
                                   f"not of {kit.kit} ({kit.tag}) in {kit.path}")
    for name, digest in record.compared:
        if tarballs.get(name) != digest:
            held = f"holds it as {tarballs[name]}" if name in tarballs else "holds no such file"
            raise ReproductionMismatch(f"{path}: key 'compared' names {name} {digest}; the kit "
                                       f"folder {kit.path} {held}: the record is of another "
                                       f"build")
    if kit.asset not in dict(record.compared):
        raise ReproductionMismatch(f"{path}: key 'compared' does not name the kit's tarball "
                                   f"{kit.asset}")
    folder = need(state.scratch, "scratch") / "reproduction"
    folder.mkdir(exist_ok=True)
    written = write_file(folder / reproduction.NAME, data)
    reporter.info(f"{reproduction.NAME}: {record.words()}")
    if not record.identical:
        reporter.warning(f"{kit.tag}: {record.words()}; published saying so (docs/repro.md)")
    return dataclasses.replace(state, record=_text_asset(reproduction.NAME, written.path))


def list_release(state: Outcome, reporter: Reporter) -> Outcome:
    """The release's SHA256SUMS, made in scratch from its own asset list (the kit folder stays
    as build made it), so a file the release gains later is listed and signed without more."""
    request, kit = state.request, state.kit
    tools = (plan.pyz_asset(request.lock_dir.parent / "pyz"),)
    assets = plan.assets_of(kit, tools, record=state.record, sources=state.sources)
    held = kit.path / kitdir.SHA256SUMS
    built = parse_sums(held.read_text(encoding="utf-8"), SHA256, str(held))
    fetched = [asset.name for asset in state.sources]
    # a tarball the folder lacks stays listed
    listed = {**built, **plan.listed(kit, assets, fetched)}
    folder = need(state.scratch, "scratch") / "release"
    folder.mkdir(exist_ok=True)
    written = write_file(folder / kitdir.SHA256SUMS, render_sums(listed).encode("utf-8"))
    added = sorted(set(listed) - set(built))
    reporter.info(f"{kitdir.SHA256SUMS}: {len(listed)} files"
                  + (f" (the release adds {', '.join(added)})" if added else ""))
    return dataclasses.replace(state, tools=tools,
                               sums=_text_asset(kitdir.SHA256SUMS, written.path))


def _read_record(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise BadInput(f"--reproduction {path}: cannot read it ({error.strerror or error})") \
            from None


def _text_asset(name: str, path: Path) -> Asset:
    hashed = hash_file(path)
    return Asset(name=name, path=path, size=hashed.size, sha256=hashed.sha256, sha1=hashed.sha1,
                 content_type=plan.TEXT_TYPE)


class SigningFailed(CheckFailed):
    """SHA256SUMS could not be signed so that allowed_signers accepts it: nothing uploaded."""


def sign_sums(state: Outcome, reporter: Reporter) -> Outcome:
    """With [publish.signing]: sign SHA256SUMS in scratch, then check it as fetch will, so that
    a wrong key fails before any upload."""
    request = state.request
    signing = request.matrix.publish.signing
    if signing is None:
        reporter.info(f"unsigned: {request.matrix.path} has no [publish.signing]")
        return state
    if request.signing_key is None:  # a dry run, or a local folder, without the key
        reporter.warning(f"no signing key here: this release (a dry run, or a local folder) is "
                         f"unsigned; a publish to GitHub or B2 signs {kitdir.SHA256SUMS} as "
                         f"{signing.identity}")
        return state
    sums = need(state.sums, "sums").path.read_bytes()
    folder = need(state.scratch, "scratch") / "signed"
    folder.mkdir(exist_ok=True)
    copy = folder / kitdir.SHA256SUMS
    write_file(copy, sums)
    try:
        with request.signing_key.as_file() as key:
            signed = signatures.sign(copy, key)
    except CheckFailed as error:
        raise SigningFailed(f"{error}; the key came from {request.signing_key.source}; nothing "
                            f"was uploaded") from None
    verdict = signatures.verify(sums, signed.signature.read_bytes(), signing.trust.signers(),
                                signing.identity)
    if not verdict.good:
        raise SigningFailed(f"the signing key from {request.signing_key.source} is not the one "
                            f"{signing.allowed_signers.name} lists for {signing.identity}: "
                            f"{verdict.reason}; nothing was uploaded")
    hashed = hash_file(signed.signature)
    reporter.info(f"{kitdir.SIGNATURE}: signed as {signing.identity} ({signed.fingerprint}), "
                  f"checked against {signing.allowed_signers.name}")
    signature = Asset(name=kitdir.SIGNATURE, path=signed.signature, size=hashed.size,
                      sha256=hashed.sha256, sha1=hashed.sha1, content_type=plan.TEXT_TYPE)
    return dataclasses.replace(state, signature=signature, signed_by=signed.fingerprint,
                               signed_sums=hash_file(copy).sha256)


def plan_release(state: Outcome, reporter: Reporter) -> Outcome:
    """The release: title, notes from BUILDINFO.txt, assets in upload order."""
    request, kit = state.request, state.kit
    base = request.notes_base or _notes_store(request.stores).download_base(kit.tag)
    signing = request.matrix.publish.signing
    signed = (signing.identity, need(state.signed_by, "signed_by")) \
        if state.signature is not None and signing is not None else None
    release = plan.make_release(kit, base, state.tools, _fetch_hint(base), state.signature,
                                signed, record=state.record, sums=state.sums,
                                sources=state.sources,
                                forbidden=tuple(v.line() for v in state.licences
                                                if v.status == licence_policy.FORBIDDEN))
    plan.check_listed(kit, release, [asset.name for asset in state.sources])
    if state.signature is not None and \
            release.asset(kitdir.SHA256SUMS).sha256 != state.signed_sums:
        raise kitdir.KitDirInvalid(f"kit folder {kit.path}: {kitdir.SHA256SUMS} changed after "
                                   f"it was signed")
    reporter.info(f"release {release.tag}: {', '.join(a.name for a in release.assets)}")
    return dataclasses.replace(state, planned=release)


def inspect_stores(state: Outcome, reporter: Reporter) -> Outcome:
    """What each store holds (publish.holdings): conflicts refused before anything changes."""
    request, kit, release = state.request, state.kit, state.release
    found = inspect_each(request.stores, release, reporter)
    reproduced, kept = False, tuple[str, ...]()
    if not request.replace:
        refuse_other_kit(request.stores, found, kit)
        source = reproducing_store(request.stores, found, kit)
        if source is not None:
            reproduced, ours = True, release
            release = held_release(source, found[request.stores.index(source)], release,
                                    need(state.scratch, "scratch"), reporter)
            kept = tuple(asset.name for asset in ours.assets if asset not in release.assets)
            if kept:  # the source holds exactly `release` now; the others, anew
                found = tuple(
                    dataclasses.replace(held, assets={a.name: Presence.SAME
                                                      for a in release.assets},
                                        held_sha256={}, notes=())
                    if store is source else inspect_each((store,), release, reporter)[0]
                    for store, held in zip(request.stores, found, strict=True))
    refuse_conflicts(request.stores, found, request.replace)
    return dataclasses.replace(state, planned=release, found=found, reproduced=reproduced,
                               kept=kept, signed_by=signed_by(release))


# run once per store, as a step named after it
EACH_STORE = "<store>"


def fill_store(state: Outcome, reporter: Reporter) -> Outcome:
    """The next store in order: put and verify each missing asset, SHA256SUMS last, finish."""
    index = len(state.records)  # the stores before it are done
    store, held = state.request.stores[index], state.found[index]
    put = upload_missing(store, held, state.release, reporter)
    return dataclasses.replace(
        state, records=(*state.records, store.finish(state.release)),
        uploaded=(*state.uploaded, *((store.name, name) for name in put)),
        changed_stores=(*state.changed_stores,
                        *((store.name,) if put or not held.published else ())))


def record_ledger(state: Outcome, reporter: Reporter) -> Outcome:
    """releases/<tag>.toml, atomically, once every store holds the whole release."""
    path = ledger.path_for(need(state.request.ledger_dir, "ledger_dir"), state.kit.tag)
    entry = ledger_entry(state.kit, state.release, state.records, need(state.judged, "judged"),
                         datetime.datetime.now(datetime.UTC))
    changed = write_ledger(path, entry, reporter)
    return dataclasses.replace(state, ledger=path, ledger_changed=changed)


class IndexMismatch(CheckFailed):
    """The index made from the ledger disagrees with the stores on this release: not written."""


def write_index(state: Outcome, reporter: Reporter) -> Outcome:
    """index.json and index.html made again from the whole ledger, written only once they
    agree with this release as the stores hold it."""
    folder, tag = need(state.request.ledger_dir, "ledger_dir"), state.kit.tag
    try:
        entries = ledger.read_all(folder)
    except BadInput as error:
        raise BadInput(f"{error}; {tag} is published and in the ledger, but the kit index was "
                       f"not made again: mend the file, then run `ninfer-kits index "
                       f"--ledger-dir {folder}`") from None
    index = kitindex.document(entries)
    problems = kitindex.mismatches(index, tag, {a.name: a.sha256 for a in state.release.assets})
    if problems:
        raise IndexMismatch(f"the kit index made from {folder} differs from the release on "
                            f"the stores; it was not written:\n  " + "\n  ".join(problems))
    paths = kitindex.write(folder, index)
    reporter.info(f"{', '.join(str(path) for path in paths)}: {len(entries)} releases")
    return dataclasses.replace(state, index=paths[0])


GITHUB_DOWNLOAD = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/releases/download/")


def _fetch_hint(base: str) -> str | None:
    """The repository `ninfer-kits.pyz fetch TAG` needs; None unless the notes show GitHub's."""
    match = GITHUB_DOWNLOAD.match(base)
    return f" --repository {match['repo']}" if match else None


def _notes_store(stores: Sequence[Store]) -> Store:
    """The store whose download URLs the notes show (GitHub's, where there is one)."""
    return min(stores, key=lambda store: store_kinds.notes_rank(store.name))


class PublishBusy(EnvironmentFailure):
    """Another publish of the same tag runs on this machine."""


@contextmanager
def held_lock(lock_dir: Path, tag: str, wait: float, reporter: Reporter) -> Iterator[None]:
    """<lock_dir>/<tag>.lock, the holder's PID in it; a second publish waits up to `wait`
    seconds, then stops naming the holder."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{tag}.lock"

    def busy(holder: str) -> PublishBusy:
        return PublishBusy(f"another publish of {tag} is running ({holder}; lock {path}); "
                           f"wait for it to finish, or give --wait SECONDS")

    def waiting(holder: str) -> None:
        reporter.info(f"waiting for another publish of {tag} ({holder}) to finish, up to "
                      f"{wait:.0f} s")

    with locks.held(path, wait=wait, busy=busy, waiting=waiting, name_holder=True):
        yield


def ledger_entry(kit: KitDir, release: Release, records: Sequence[StoreRecord],
                 judged: needs.Judged, when: datetime.datetime) -> ledger.LedgerEntry:
    info = kit.info
    return ledger.LedgerEntry(
        tag=kit.tag, kit=kit.kit, card=info.card, upstream=info.upstream,
        upstream_url=info.upstream_url, revision=info.revision, version=info.version,
        arch=info.arch, cuda_version=info.cuda_version, toolchain=info.toolchain,
        asset=kit.asset, published_at=when,
        tarballs=tuple(ledger.LedgerTarball(flavour=flavour.name, asset=flavour.asset,
                                            sha256=flavour.sha256, size=flavour.size)
                       for flavour in kit.siblings),
        stores=tuple(ledger.LedgerStore(name=record.store, location=record.location,
                                        details=record.details) for record in records),
        assets=tuple(ledger.LedgerAsset(
            name=asset.name, size=asset.size, sha256=asset.sha256, sha1=asset.sha1,
            urls=tuple((record.store, record.urls[asset.name]) for record in records
                       if asset.name in record.urls)) for asset in release.assets),
        floor=info.floor,
        # BUILDINFO's `inputs`, for watch
        inputs=None if info.inputs == "unknown" else info.inputs, input_parts=info.input_parts,
        signed_by=signed_by(release), reproduction=reproduction_of(release),
        driver_minimum=judged.driver_minimum,
        distributions_as_of=judged.distributions_as_of, flavours=judged.flavours)


def reproduction_of(release: Release) -> ledger.LedgerReproduction | None:
    """The published REPRODUCTION.json's words for the ledger; None without one."""
    asset = next((a for a in release.assets if a.name == reproduction.NAME), None)
    if asset is None:
        return None
    record = reproduction.read(asset.path)
    return ledger.LedgerReproduction(result=record.result, date=record.date, run=record.run,
                                     summary=record.summary, sha256=asset.sha256)


def signed_by(release: Release) -> str | None:
    """The published SHA256SUMS.sig's key fingerprint; None unsigned."""
    signature = next((a for a in release.assets if a.name == kitdir.SIGNATURE), None)
    if signature is None:
        return None
    return signatures.parse_signature(signature.path.read_bytes(), signature.name).fingerprint


def write_ledger(path: Path, entry: ledger.LedgerEntry, reporter: Reporter) -> bool:
    """Write releases/<tag>.toml unless it records this very release; whether written."""
    if path.exists():
        try:
            if ledger.read(path).same_release(entry):
                reporter.info(f"{path}: already records this release; unchanged")
                return False
        except BadInput as error:  # a damaged ledger is written again, saying so
            reporter.warning(f"{error}; writing it again")
    ledger.write(path, entry)
    reporter.info(f"{path}: written")
    return True
