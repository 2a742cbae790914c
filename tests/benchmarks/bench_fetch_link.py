"""fetch against the bare transfer (`curl -o /dev/null`) of the same kit over a link of a given
speed: on a rented box the download is the wait, and hashing, inflating and unpacking should
hide behind it.

The kit, its ledger and the server are the fetch benchmark's (fetch_kit: a >= 300 MB tarball,
a separate server process with Range), the server here pacing each body to a link's speed
(RATES, MB = 10^6 bytes): 64 KiB sendfiles from a token bucket of at most 256 KiB, so a reader
that falls behind loses link time as it would on a real link. curl's time checks the pace
(within 3% of the rate, else the row is an error).

- ours: what the fetch benchmark times (fetch_kit.OURS: `ninfer-kits fetch KIT` before its
  verify table, as a whole Python process: the ledger, SHA256SUMS, SHA1SUMS and BUILDINFO.txt,
  the tarball downloaded once while sha256 and sha1 are taken and it is unpacked);
- baseline: `curl -fsS -o /dev/null` of the tarball alone, at the same pace.

Target: ours <= 1.05x the bare transfer, at each rate. Ours and the baseline alternate, round
after round, from an empty destination each (removed, then `sync`, outside the timing); the
rows give medians.

Where the rest goes, in informational rows per rate, from the same fetch with clocks around
its parts (PROBE: the same calls, timed from inside the process, in the first PROBES rounds;
the fastest run, the least disturbed by other work, is shown):
`transfer`, the tarball's request to its last byte written and hashed, with the CPU seconds of
each of fetch's threads (gunzip: the gzip framing and any streamed member; inflate: the pool
that inflates pack's members whole; downloading and hashing; unpacking) and of the server;
`behind`, what fetch still does after that last byte (inflating and unpacking that did not keep
up, the kit moved into place); `fixed`, the start-up and the small files (interpreter, imports,
ledger, SHA256SUMS, SHA1SUMS and BUILDINFO.txt, exit). `ceiling`: the best rate fetch reaches
from an unpaced server, what this machine's cores sustain. Each main row also says how much CPU
other processes took during a run of ours (median): this machine's 2 cores are shared.
`16-cores` rows: the 200 MB/s rows of the newest run on the GPU host, for its cores
(scripts/fetch-link-check.sh, kept in recorded/), shown beside this machine's.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import Context, Result, progress
from fetch_kit import KIT, OURS, assemble, fresh, kit_names, serve, time_command, write_ledger

NAME = "fetch-link"
DESCRIPTION = "fetch vs the bare transfer (curl -o /dev/null) over a link paced to 50, 200 MB/s"
BASELINE = "curl -o /dev/null"
RATES = (50_000_000, 200_000_000)  # bytes/s
TARGET = 1.05
PACE_TOLERANCE = 0.03  # how far curl's rate may be from the server's pace
REPEAT = 5
PROBES = 3  # rounds that also run PROBE and the unpaced fetch (informational rows)

# OURS with clocks (time.monotonic: one clock for every process) around its parts; prints them
# as JSON. CPU seconds per thread: fetch's downloader, the decompressing thread (the gzip
# framing, and the members it streams), the inflating pool (pack's members, read whole), and
# main (which unpacks).
PROBE = r'''
import time
started = time.monotonic()
import sys
from pathlib import Path
from ninfer_kits.fetch.fetch import Fetcher
from ninfer_kits.fetch.http import Client
from ninfer_kits.fetch.locate import context, locate
from ninfer_kits.log import Reporter
imported = time.monotonic()
import json, threading
from ninfer_kits.fetch import download
marks = {"small": 0.0, "cpu": {}}
def clocked(cls, name, before=None, after=None):
    original = getattr(cls, name)
    def wrapper(*args, **kwargs):
        if before: marks.setdefault(before, time.monotonic())
        try:
            return original(*args, **kwargs)
        finally:
            if after: marks[after] = time.monotonic()
    setattr(cls, name, wrapper)
small = Fetcher._small
def timed_small(self, located, file):
    begun = time.monotonic()
    try:
        return small(self, located, file)
    finally:
        marks["small"] += time.monotonic() - begun
Fetcher._small = timed_small
clocked(download.HttpSource, "open", before="request")
clocked(download.Downloader, "run", after="downloaded")
thread_run = threading.Thread.run
def counted(self):
    try:
        thread_run(self)
    finally:
        marks["cpu"][self.name] = time.thread_time()
threading.Thread.run = counted
ctx = context(Path(sys.argv[1]))
client = Client(servers=(ctx.api,))  # the local server, named as --api would name it
release = locate(sys.argv[2], "github", ctx, client)
located = time.monotonic()
Fetcher(client, Reporter()).fetch(release, Path(sys.argv[3]))
fetched = time.monotonic()
marks["cpu"]["main"] = time.thread_time()
marks.update(started=started, imported=imported, located=located, fetched=fetched)
print(json.dumps(marks), flush=True)
'''
BEHIND = "after the last byte"
FIXED = ("interpreter", "imports", "ledger", "small files", "before the tarball", "exit")
# (thread name or pool prefix, label): a pool's threads are named PREFIX_0, PREFIX_1...
THREADS = (("ninfer-kits decompress", "gunzip"), ("ninfer-kits inflate", "inflate (pool)"),
           ("ninfer-kits-download", "download+hash"), ("main", "unpack (main)"))


def _probe(command: list[str], cwd: Path, dest: Path) -> dict[str, float]:
    """One PROBE run: seconds of each part, the fixed ones and the transfer, and CPU seconds."""
    fresh(dest)
    spawned = time.monotonic()
    done = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False)
    ended = time.monotonic()
    if done.returncode != 0:
        raise RuntimeError(f"the probe exited {done.returncode}: {done.stderr.strip()[-400:]}")
    marks = json.loads(done.stdout.strip().splitlines()[-1])
    parts = {
        "interpreter": marks["started"] - spawned,
        "imports": marks["imported"] - marks["started"],
        "ledger": marks["located"] - marks["imported"],
        "small files": marks["small"],
        "before the tarball": marks["request"] - marks["located"] - marks["small"],
        "transfer": marks["downloaded"] - marks["request"],
        BEHIND: marks["fetched"] - marks["downloaded"],
        "exit": ended - marks["fetched"],
    }
    parts["total"] = ended - spawned
    parts["fixed"] = sum(parts[key] for key in FIXED)
    for thread, label in THREADS:
        parts[f"cpu {label}"] = sum(cpu for name, cpu in marks["cpu"].items()
                                    if name == thread or name.startswith(f"{thread}_"))
    return parts


def _server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy() -> float:
    """CPU seconds the whole machine has been busy (every core, idle and iowait left out)."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _ours_cpu() -> float:
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(use.ru_utime + use.ru_stime for use in usage)


def _time_ours(command: list[str], work: Path, dest: Path, server: int) -> tuple[float, float]:
    """One run of ours: its seconds, and the CPU seconds the rest of the machine used meanwhile
    (busy time less this process's, its children's and the server's): a 2-core machine shared
    with other work shows it here."""
    fresh(dest)
    before = _busy() - _ours_cpu() - _server_cpu(server)
    elapsed = time_command(command, work, dest)
    return elapsed, _busy() - _ours_cpu() - _server_cpu(server) - before


def _fastest(runs: list[dict[str, float]]) -> dict[str, float]:
    """The parts of the fastest probe run: the one other work on the machine disturbed least
    (a sum of medians of parts would be no run's)."""
    return min(runs, key=lambda parts: parts["total"])


def _ms(value: float) -> str:
    return f"{value * 1000:.0f} ms"


def run(ctx: Context) -> list[Result]:
    tag, asset = kit_names()
    if shutil.which("curl") is None:
        raise RuntimeError("curl is not on PATH (apt-get install curl)")
    release = assemble(ctx.cache, tag, asset)
    size = (release / asset).stat().st_size
    work = ctx.cache / "fetch-link"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dest = work / "dest"  # every run's: fetch's kit (curl writes nothing)
    rounds = min(ctx.repeat, REPEAT)
    ours: dict[int, list[float]] = {rate: [] for rate in (*RATES, 0)}
    bare: dict[int, list[float]] = {rate: [] for rate in RATES}
    probes: dict[int, list[dict[str, float]]] = {rate: [] for rate in (*RATES, 0)}
    server_cpu: dict[int, list[float]] = {rate: [] for rate in RATES}
    others: dict[int, list[float]] = {rate: [] for rate in RATES}
    load = os.getloadavg()[0]
    try:
        commands = {}
        with serve(release) as unpaced, serve(release, RATES[0]) as slow, \
                serve(release, RATES[1]) as fast:
            servers = {0: unpaced, RATES[0]: slow, RATES[1]: fast}
            for rate, base in servers.items():
                matrix = write_ledger(work / str(rate), release, base.base, tag)
                commands[rate] = (
                    [sys.executable, "-c", OURS, str(matrix), KIT, str(dest)],
                    ["curl", "-fsS", "-o", "/dev/null", f"{base.base}/{tag}/{asset}"],
                    [sys.executable, "-c", PROBE, str(matrix), KIT, str(dest)],
                )
            progress(f"{asset}: {size / 1e6:.0f} MB at {', '.join(f'{r / 1e6:g}' for r in RATES)}"
                     f" MB/s; one warm-up, then {rounds} alternating rounds (the first "
                     f"{PROBES} with the probe)")
            for index in range(rounds + 1):
                for rate in RATES if index else RATES[-1:]:  # warm-up: the fastest rate's
                    fetch, curl, probe = commands[rate]
                    mine, other = _time_ours(fetch, work, dest, servers[rate].pid)
                    cpu = _server_cpu(servers[rate].pid)
                    theirs = time_command(curl, work, dest)
                    cpu = _server_cpu(servers[rate].pid) - cpu
                    if not index:
                        continue
                    ours[rate].append(mine)
                    others[rate].append(other)
                    bare[rate].append(theirs)
                    server_cpu[rate].append(cpu)
                    line = (f"round {index}, {rate / 1e6:g} MB/s: ours {mine:.2f} s, curl "
                            f"{theirs:.2f} s ({size / theirs / 1e6:.1f} MB/s); other "
                            f"processes {other:.2f} CPU s")
                    if index <= PROBES:
                        probes[rate].append(_probe(probe, work, dest))
                        line += (f", probe {probes[rate][-1]['total']:.2f} s (transfer "
                                 f"{probes[rate][-1]['transfer']:.2f} s)")
                    progress(line)
                if 0 < index <= PROBES:
                    fetch, _, probe = commands[0]
                    ours[0].append(time_command(fetch, work, dest))
                    probes[0].append(_probe(probe, work, dest))
                    progress(f"round {index}, unpaced: ours {ours[0][-1]:.2f} s "
                             f"({size / ours[0][-1] / 1e6:.0f} MB/s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (ctx.cache / "fetch-link.json").write_text(json.dumps(
        {"ours": ours, "curl": bare, "probes": probes, "server_cpu": server_cpu,
         "others": others}, indent=1))
    load_words = f"load {load:.1f} -> {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores"
    return [*_results(size, asset, rounds, load_words, ours, bare, probes, server_cpu, others),
            *_recorded_rows()]


# The rows of the newest run on a machine with cores to spare (scripts/fetch-link-check.sh on
# the GPU host, 16 cores), shown beside this machine's: what fetch does when inflating and
# unpacking need not share two cores with the download.
RECORDED = Path(__file__).resolve().parent / "recorded"
RECORDED_ROWS = (f"{NAME}", f"{NAME}/transfer", f"{NAME}/behind", f"{NAME}/fixed")
_ROW = re.compile(r"^\| (?P<name>\S+) \| (?P<what>[^|]+) \| (?P<ours>[\d.]+) (?P<ou>ms|s) \| "
                  r"`[^`]+` \| (?P<base>[\d.]+) (?P<bu>ms|s) \|")


def _recorded_rows() -> list[Result]:
    runs = sorted(RECORDED.glob("fetch-link-check-*.txt"))
    if not runs:
        return []
    newest = runs[-1]
    text = newest.read_text(encoding="utf-8")
    cores = re.search(r"^machine: (\d+) cores", text, re.MULTILINE)
    scale = {"ms": 1e-3, "s": 1.0}
    rows = []
    for match in filter(None, map(_ROW.match, text.splitlines())):
        if match["name"] not in RECORDED_ROWS or "200 MB/s" not in match["what"]:
            continue
        rows.append(Result(
            "-".join(filter(None, (f"{NAME}/{cores[1] if cores else '?'}-cores",
                                   match["name"].partition("/")[2]))), match["what"].strip(),
            BASELINE, float(match["ours"]) * scale[match["ou"]],
            float(match["base"]) * scale[match["bu"]], None,
            note=f"recorded by `fetch-link-check.sh` on the GPU host in {newest.name}"))
    return rows


def _results(size: int, asset: str, rounds: int, load: str, ours: dict[int, list[float]],
             bare: dict[int, list[float]], probes: dict[int, list[dict[str, float]]],
             server_cpu: dict[int, list[float]], others: dict[int, list[float]]
             ) -> list[Result]:
    results = []
    for rate in RATES:
        mb = f"{rate / 1e6:g} MB/s"
        mine, theirs = statistics.median(ours[rate]), statistics.median(bare[rate])
        paced = size / theirs
        error = None
        if abs(paced / rate - 1) > PACE_TOLERANCE:
            error = (f"the server paced curl at {paced / 1e6:.1f} MB/s, not {mb} "
                     f"± {PACE_TOLERANCE:.0%}")
        results.append(Result(
            NAME, f"fetch {size / 1e6:.0f} MB kit ({asset}) over a {mb} link (paced local HTTP)",
            BASELINE, mine, theirs, TARGET, error=error,
            note=f"curl at {paced / 1e6:.1f} MB/s; min {min(ours[rate]):.2f} s vs "
                 f"{min(bare[rate]):.2f} s, {rounds} runs; other processes "
                 f"{statistics.median(others[rate]):.2f} CPU s per run of ours, {load}"))
        parts = _fastest(probes[rate])
        cpu = ", ".join(f"{label} {parts[f'cpu {label}']:.2f} s" for _, label in THREADS)
        results.append(Result(
            f"{NAME}/transfer", f"{mb}: fetch's tarball, its request to its last byte written "
                                f"and hashed", BASELINE, parts["transfer"], theirs, None,
            note=f"CPU: {cpu}; the server {statistics.median(server_cpu[rate]):.2f} s per "
                 f"transfer"))
        results.append(Result(
            f"{NAME}/behind", f"{mb}: fetch after the tarball's last byte (inflating and "
                              f"unpacking left to do, the kit moved into place)", BASELINE,
            parts[BEHIND], theirs, None, note=f"the fastest of {len(probes[rate])} probe runs "
                                              f"({parts['total']:.2f} s), as every row of "
                                              f"its parts"))
        fixed = ", ".join(f"{key} {_ms(parts[key])}" for key in FIXED)
        results.append(Result(
            f"{NAME}/fixed", f"{mb}: fetch's fixed costs (start-up, ledger, "
                             f"SHA256SUMS+SHA1SUMS+BUILDINFO.txt, exit)",
            BASELINE, parts["fixed"], theirs, None, note=fixed))
    parts = _fastest(probes[0])
    top = max(RATES)
    reached = size / min(ours[0])
    cpu = ", ".join(f"{label} {parts[f'cpu {label}']:.2f} s" for _, label in THREADS)
    results.append(Result(
        f"{NAME}/ceiling", "fetch from the unpaced server: the rate this machine sustains",
        f"the {top / 1e6:g} MB/s link", reached / 1e6, top / 1e6, None, unit="MB/s",
        note=f"the best of {len(ours[0])} runs, {min(ours[0]):.2f} s; in the fastest probe "
             f"run, transfer {parts['transfer']:.2f} s, CPU: {cpu}"))
    return results
