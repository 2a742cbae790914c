"""What each stage of the publish does (the table in order is publish.stages): each takes the
Outcome so far and returns it with its own result added; its docstring says what."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ninfer_kits import ledger
from ninfer_kits.errors import need
from ninfer_kits.log import Reporter
from ninfer_kits.publish import plan
from ninfer_kits.publish.holdings import (
    held_release,
    inspect_each,
    refuse_conflicts,
    refuse_other_kit,
    reproducing_store,
    upload_missing,
)
from ninfer_kits.publish.ledger_entry import write_ledger
from ninfer_kits.publish.state import Outcome
from ninfer_kits.publish.store import Presence, Store
from ninfer_kits.publish.stores import NOTES_PREFERENCE
from ninfer_kits.publish.tag_lock import held_lock


def read_kit(state: Outcome, reporter: Reporter) -> Outcome:
    """Read dist/<tag>/ (kitdir): its layout, sizes under every store's limit, the names the
    matrix renders, every hash."""
    request = state.request
    limits = [(store.describe(), store.max_asset_size) for store in request.stores]
    return dataclasses.replace(state, read=plan.read_kit(request.kit_dir, request.matrix, limits))


def lock(state: Outcome, reporter: Reporter) -> Outcome:
    """One publish of a tag at a time on this machine (a flock under the cache dir), held with
    a scratch folder beside it until the last stage."""
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


def plan_release(state: Outcome, reporter: Reporter) -> Outcome:
    """The release: title, notes from BUILDINFO.txt, assets in upload order."""
    request, kit = state.request, state.kit
    base = request.notes_base or _notes_store(request.stores).download_base(kit.tag)
    tools = (plan.pyz_asset(request.lock_dir.parent / "pyz"),)
    release = plan.make_release(kit, base, tools, _fetch_hint(base))
    reporter.info(f"release {release.tag}: {', '.join(a.name for a in release.assets)}")
    return dataclasses.replace(state, planned=release)


def inspect_stores(state: Outcome, reporter: Reporter) -> Outcome:
    """Each store: what it holds already. Another kit under the tag, and every conflict, are
    refused before anything changes; a release published with this build's very tarballs is
    reproduced, keeping the store's own copy of every other asset."""
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
                               kept=kept)


# fill_store runs once per store, as a step named after it ("b2", "github", "local")
EACH_STORE = "<store>"


def fill_store(state: Outcome, reporter: Reporter) -> Outcome:
    """The next store in order (B2 first, then GitHub): put and verify every asset not there
    yet, SHA256SUMS last, then finish (GitHub: publish the draft)."""
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
    changed = write_ledger(path, state.kit, state.release, state.records, reporter)
    return dataclasses.replace(state, ledger=path, ledger_changed=changed)


GITHUB_DOWNLOAD = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/releases/download/")


def _fetch_hint(base: str) -> str | None:
    """What `ninfer-kits.pyz fetch TAG` needs besides the tag: the repository (the pyz carries
    no matrix); None when the notes' downloads are not GitHub's (then they show no pyz line)."""
    match = GITHUB_DOWNLOAD.match(base)
    return f" --repository {match['repo']}" if match else None


def _notes_store(stores: Sequence[Store]) -> Store:
    """The store whose download URLs the notes show (GitHub's, where there is one)."""
    rank = {name: index for index, name in enumerate(NOTES_PREFERENCE)}
    return min(stores, key=lambda store: rank.get(store.name, len(rank)))
