"""Which kits are stale: the matrix's pins and the upstreams' heads against the ledger.

A kit is stale when the ledger (releases/*.toml) has no release of it ("missing release"), when
its newest release was built from another revision than the one matrix.toml pins ("new pin")
or, unpinned, than its branch's head ("new head"), or when it was built with another toolchain
than the matrix names now ("toolchain changed").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.matrix import Kit
from ninfer_kits.publish import ledger
from ninfer_kits.publish.ledger import LedgerEntry


@dataclass(frozen=True)
class Stale:
    kit: Kit
    revision: str  # what to build: a full SHA (a head), or the pin as matrix.toml writes it
    reason: str


def latest_releases(ledger_dir: Path) -> dict[str, LedgerEntry]:
    """The newest published release of each kit; BadInput names a file that does not parse."""
    newest: dict[str, LedgerEntry] = {}
    if not ledger_dir.is_dir():
        return newest
    for path in sorted(ledger_dir.glob(f"*{ledger.SUFFIX}")):
        entry = ledger.read(path)
        known = newest.get(entry.kit)
        if known is None or entry.published_at > known.published_at:
            newest[entry.kit] = entry
    return newest


def _same(revision: str, wanted: str) -> bool:
    return revision.lower().startswith(wanted.lower())


def plan(kits: Sequence[Kit], heads: Mapping[str, str], releases: Mapping[str, LedgerEntry],
         revision: str | None = None) -> list[Stale]:
    """The stale kits among `kits`, in order. `heads`: upstream id → branch head (absent for an
    upstream whose head is unknown: pinned, local or failed); `revision` overrides both (a
    dispatch that asks for one)."""
    stale: list[Stale] = []
    for kit in kits:
        upstream = kit.upstream
        wanted = revision or upstream.revision or heads.get(upstream.id)
        if wanted is None:
            continue
        released = releases.get(kit.id)
        if released is None:
            reason = "missing release: the ledger has none of this kit"
        elif not _same(released.revision, wanted):
            why = ("requested revision" if revision else
                   "new pin" if upstream.revision else f"new head of {upstream.branch}")
            reason = f"{why}: {wanted[:12]}, released {released.revision[:12]} " \
                     f"({released.tag})"
        elif released.toolchain != kit.toolchain.id:
            reason = (f"toolchain changed: {released.toolchain} → {kit.toolchain.id} "
                      f"({released.tag})")
        else:
            continue
        stale.append(Stale(kit, wanted, reason))
    return stale
