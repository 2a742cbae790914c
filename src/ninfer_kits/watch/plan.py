"""Which kits are stale: the matrix's pins and the upstreams' heads against the ledger.

A kit is stale when the ledger (releases/*.toml) has no release of it ("missing release"), when
none of its releases was built from the revision matrix.toml pins ("new pin") or, unpinned, from
its branch's head ("new head"), or when the newest release built from that revision was built
with another toolchain than the matrix names now ("toolchain changed"; a kit built with the
local builder records the host, no matrix toolchain, and is not judged on it: the scheduled
workflow builds with the docker builder), or from other inputs than the matrix and ninfer-kits
give it today ("inputs changed: toolchain tc, cmake_options": ninfer_kits.matrix.inputs; a release
recorded before inputs were is not judged on them, so an upgrade rebuilds nothing; a host build
is not judged on the toolchain's images). A dispatch may `force` the chosen kits. Any release of the
revision counts, not only the kit's newest: after a dispatch built an older revision, the head,
released before, is not built again (its tag is taken, and publish would refuse the new build).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import ledger
from ninfer_kits.buildinfo import HOST_TOOLCHAIN
from ninfer_kits.ledger import LedgerEntry
from ninfer_kits.matrix import Kit
from ninfer_kits.matrix.inputs import IMAGE_PARTS, KitInputs, changed_parts, kit_inputs


@dataclass(frozen=True)
class Stale:
    kit: Kit
    revision: str  # what to build: a full SHA (a head), or the pin as matrix.toml writes it
    reason: str
    inputs: KitInputs  # what the kit is made of today (cache_key takes the toolchain's part)


def kit_releases(ledger_dir: Path) -> dict[str, list[LedgerEntry]]:
    """Each kit's published releases, newest first (by when published, then tag, as fetch
    orders them); BadInput names a file that does not parse."""
    found: dict[str, list[LedgerEntry]] = {}
    for entry in reversed(ledger.read_all(ledger_dir)):
        found.setdefault(entry.kit, []).append(entry)
    return found


def latest_releases(ledger_dir: Path) -> dict[str, LedgerEntry]:
    """The newest published release of each kit; BadInput names a file that does not parse."""
    return {kit: entries[0] for kit, entries in kit_releases(ledger_dir).items()}


def _same(revision: str, wanted: str) -> bool:
    return revision.lower().startswith(wanted.lower())


def plan(kits: Sequence[Kit], heads: Mapping[str, str],
         releases: Mapping[str, Sequence[LedgerEntry]],
         revision: str | None = None, *, force: bool = False) -> list[Stale]:
    """The stale kits among `kits`, in order. `heads`: upstream id → branch head (absent for an
    upstream whose head is unknown: pinned, local or failed); `revision` overrides both (a
    dispatch that asks for one); `releases`: each kit's releases, newest first (kit_releases);
    `force`: every kit whose revision is known is stale (a dispatch that asks for it)."""
    stale: list[Stale] = []
    for kit in kits:
        upstream = kit.upstream
        wanted = revision or upstream.revision or heads.get(upstream.id)
        if wanted is None:
            continue
        history = releases.get(kit.id, ())
        released = next((entry for entry in history if _same(entry.revision, wanted)), None)
        inputs = kit_inputs(kit, released.revision if released else wanted)
        changed = _changed_inputs(kit, released, inputs) if released else ()
        if force:
            reason = "forced by dispatch"
        elif not history:
            reason = "missing release: the ledger has none of this kit"
        elif released is None:
            newest = history[0]
            why = ("requested revision" if revision else
                   "new pin" if upstream.revision else f"new head of {upstream.branch}")
            reason = f"{why}: {wanted[:12]}, released {newest.revision[:12]} " \
                     f"({newest.tag})"
        elif released.toolchain not in (kit.toolchain.id, HOST_TOOLCHAIN):
            reason = (f"toolchain changed: {released.toolchain} → {kit.toolchain.id} "
                      f"({released.tag})")
        elif changed:
            reason = f"inputs changed: {', '.join(changed)} ({released.tag})"
        else:
            continue
        stale.append(Stale(kit, wanted, reason, inputs))
    return stale


def _changed_inputs(kit: Kit, released: LedgerEntry, now: KitInputs) -> tuple[str, ...]:
    """What differs between the inputs `released` was built from and today's, as a reason
    names them; () when they are the same or the release recorded none."""
    if released.inputs is None or released.inputs == now.digest:
        return ()
    # A host build used no image of the matrix: its toolchain's parts say nothing of it.
    host = released.toolchain == HOST_TOOLCHAIN
    if not released.input_parts:
        return () if host else ("(which parts the ledger does not record)",)
    names = changed_parts(dict(released.input_parts), now,
                          ignore=IMAGE_PARTS if host else frozenset())
    return tuple(f"{name} {kit.toolchain.id}" if name in IMAGE_PARTS else name
                 for name in names)
