"""fetch against `curl -o … && sha256sum -c && tar xzf` of the same >= 300 MB kit, from the same
local HTTP server, in the same run.

The kit (fetch_kit.py) is a kit folder as `build` writes it (packed by pack_tree), made once
in .cache/bench/fetch/: NVIDIA's libcurand, libcufft, libcufftw and libcudart (from the wheels
the archive benchmark also uses; mostly compressed device code, as real kits are), then the
largest shared libraries of the machine until the tarball is at least 300 MB.
The server is a separate process (sendfile, with Range), so neither side pays for it.

- ours: what `ninfer-kits fetch KIT` does before its verify table, as a whole Python process:
  the ledger read, SHA256SUMS, SHA1SUMS and BUILDINFO.txt fetched, the tarball downloaded once
  while sha256 and sha1 are taken and it is unpacked (KitArchive) into a staging folder that
  becomes DEST/kit when the checksums match;
- baseline: `curl -fsS -o` of the tarball, SHA256SUMS and BUILDINFO.txt, `sha256sum -c
  SHA256SUMS`, `tar xzf` (three passes over the bytes).

Each round starts from an empty destination (removed, then `sync`, outside the timing); ours
and the baseline alternate. Target: ours <= 0.8x. An informational row times the whole
`ninfer-kits fetch` command, its verify of the unpacked kit on this host included.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
from pathlib import Path

from common import Context, Result, progress
from fetch_kit import KIT, OURS, assemble, kit_names, listing, serve, time_command, write_ledger

NAME = "fetch"
DESCRIPTION = ("fetch (one pass: download, sha256+sha1, unpack) vs curl -o && sha256sum -c && "
               "tar xzf, >= 300 MB kit")
BASELINE = "curl+sha256sum+tar xzf"
TARGET = 0.8
REPEAT = 5


def run(ctx: Context) -> list[Result]:
    tag, asset = kit_names()
    if shutil.which("curl") is None:
        raise RuntimeError("curl is not on PATH (apt-get install curl)")
    release = assemble(ctx.cache, tag, asset)
    size = (release / asset).stat().st_size
    work = ctx.cache / "fetch" / "run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        with serve(release) as server:
            base = server.base
            matrix = write_ledger(work, release, base, tag)
            ours_dest, gnu_dest, cli_dest = work / "ours", work / "gnu", work / "cli"
            ours = [sys.executable, "-c", OURS, str(matrix), KIT, str(ours_dest)]
            url = f"{base}/{tag}"
            gnu = ["bash", "-c", "set -e; "
                   f"curl -fsS -o {asset} {url}/{asset}; curl -fsS -o SHA256SUMS {url}/SHA256SUMS; "
                   f"curl -fsS -o BUILDINFO.txt {url}/BUILDINFO.txt; "
                   f"sha256sum -c SHA256SUMS >/dev/null; tar xzf {asset}"]
            script = Path(sys.executable).parent / "ninfer-kits"
            launcher = [str(script)] if script.exists() else [sys.executable, "-m", "ninfer_kits"]
            whole = [*launcher, "fetch", KIT, "--matrix", str(matrix), "--dest", str(cli_dest)]
            rounds = min(ctx.repeat, REPEAT)
            progress(f"{asset}: {size / 1e6:.0f} MB from {base}; one warm-up, then {rounds} "
                     f"alternating rounds")
            samples: dict[str, list[float]] = {"ours": [], "gnu": [], "cli": []}
            for index in range(rounds + 1):
                for key, command, dest in (("ours", ours, ours_dest), ("gnu", gnu, gnu_dest),
                                           ("cli", whole, cli_dest)):
                    # verify, in the whole command, may say the kit will not run here (exit 1):
                    # this host need not be the kit's
                    elapsed = time_command(command, dest if key == "gnu" else work, dest,
                                           (0, 1) if key == "cli" else (0,))
                    if index:
                        samples[key].append(elapsed)
                if index:
                    progress(f"round {index}: ours {samples['ours'][-1]:.2f} s, baseline "
                             f"{samples['gnu'][-1]:.2f} s, whole command "
                             f"{samples['cli'][-1]:.2f} s")
            same = listing(ours_dest / "kit") == listing(gnu_dest / "kit")
    finally:
        shutil.rmtree(work, ignore_errors=True)  # three unpacked copies of the kit
    median = {key: statistics.median(values) for key, values in samples.items()}
    load = f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores"
    label = f"{size / 1e6:.0f} MB kit ({asset}) over local HTTP"
    error = None if same else "the unpacked trees differ (files or sizes)"
    results = [
        Result(NAME, f"fetch {label}", BASELINE, median["ours"], median["gnu"], TARGET,
               error=error, note=f"min {min(samples['ours']):.2f} s vs "
                                 f"{min(samples['gnu']):.2f} s, {rounds} runs, {load}"),
        Result(f"{NAME}/cli", "ninfer-kits fetch, verify on this host included", BASELINE,
               median["cli"], median["gnu"], None,
               note=f"min {min(samples['cli']):.2f} s"),
    ]
    (ctx.cache / "fetch" / "last.json").write_text(json.dumps(samples, indent=1))
    return results
