"""Which kits are stale, and why: the matrix's pins and the upstreams' heads against the ledger
(the reasons: docs/watch.md). Any release of the revision counts, not only the newest: after a
dispatch built an older revision, the head released before is not built again (its tag is
taken, and publish would refuse the new build).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.kit.buildinfo import HOST_TOOLCHAIN
from ninfer_kits.matrix import Kit
from ninfer_kits.matrix.inputs import IMAGE_PARTS, KitInputs, changed_parts, kit_inputs
from ninfer_kits.release import ledger
from ninfer_kits.release.ledger import LedgerEntry


@dataclass(frozen=True)
class Stale:
    kit: Kit
    revision: str  # what to build: a full SHA (a head), or the pin as matrix.toml writes it
    reason: str
    inputs: KitInputs  # what the kit is made of today (cache_key takes the toolchain's part)


def kit_releases(ledger_dir: Path) -> dict[str, list[LedgerEntry]]:
    """Each kit's releases, newest first; BadInput names a file that does not parse."""
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
    """The stale kits among `kits`, in order. `heads`: upstream → head (absent: pinned, local or
    failed); `revision` overrides both; `releases`: kit_releases'; `force`: every kit whose
    revision is known is stale."""
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
    """The input parts that differ between `released` and today; () if same or unrecorded."""
    if released.inputs is None or released.inputs == now.digest:
        return ()
    # a host build used no image of the matrix
    host = released.toolchain == HOST_TOOLCHAIN
    if not released.input_parts:
        return () if host else ("(which parts the ledger does not record)",)
    names = changed_parts(dict(released.input_parts), now,
                          ignore=IMAGE_PARTS if host else frozenset())
    return tuple(f"{name} {kit.toolchain.id}" if name in IMAGE_PARTS else name
                 for name in names)
