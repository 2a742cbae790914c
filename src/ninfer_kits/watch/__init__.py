"""`ninfer-kits watch`: which kits need a rebuild because an upstream moved (docs/watch.md).
`heads` reads each tracked branch's head cheaply, `plan` compares with the ledger, `command`
prints it and hands the rebuild workflow its build matrix."""

from __future__ import annotations

from ninfer_kits.watch.heads import HeadClient, HeadError, HeadResult, StateFile
from ninfer_kits.watch.plan import Stale, kit_releases, latest_releases, plan

__all__ = ["HeadClient", "HeadError", "HeadResult", "Stale", "StateFile", "kit_releases",
           "latest_releases", "plan"]
