"""`ninfer-kits watch`: which kits need a rebuild, because an upstream moved.

`heads` asks GitHub's REST API for each tracked branch's head with conditional requests (an
ETag cache kept in a JSON state file, so an unchanged upstream answers 304 and costs no rate
limit), honouring Retry-After and the rate-limit headers within a bound. `plan` compares the
heads and the pins of matrix.toml with the ledger (releases/*.toml) and says, kit by kit, what
is stale and why. The command (`ninfer_kits.watch.command`) prints it and writes the build
matrix to $GITHUB_OUTPUT for .github/workflows/rebuild.yml.
"""

from __future__ import annotations

from ninfer_kits.watch.heads import HeadClient, HeadError, HeadResult, StateFile
from ninfer_kits.watch.plan import Stale, kit_releases, latest_releases, plan

__all__ = ["HeadClient", "HeadError", "HeadResult", "Stale", "StateFile", "kit_releases",
           "latest_releases", "plan"]
