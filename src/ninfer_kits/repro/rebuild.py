"""Two builds of one kit under deliberately different conditions, each a separate `ninfer-kits
build` process so that nothing of the first reaches the second. What differs, and why the clock
is not faked: docs/repro.md."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    BadInput,
    CheckFailed,
    EnvironmentFailure,
)
from ninfer_kits.host import children
from ninfer_kits.kit import buildinfo, kitdir


@dataclass(frozen=True)
class Conditions:
    """What one build runs under; `describe` names it in the report."""

    name: str
    folder: Path  # dist/, cache and work trees live under it
    jobs: int
    env: Mapping[str, str]
    umask: int
    extra: tuple[str, ...] = ()  # more `build` options (--no-ccache)

    def describe(self) -> str:
        env = ", ".join(f"{key}={self.env[key]}" for key in ("TZ", "LANG", "HOME", "USER"))
        extra = f", {' '.join(self.extra)}" if self.extra else ""
        return (f"{self.name}: folder {self.folder}, -j{self.jobs}, umask {self.umask:03o}, "
                f"{env}{extra}")


@dataclass(frozen=True)
class Built:
    conditions: Conditions
    kit: kitdir.KitDir


def two_conditions(base: Path, builder: str) -> tuple[Conditions, Conditions]:
    """The first build as a maintainer's shell runs it; the second unlike it where nothing must."""
    first = Conditions(
        name="first", folder=base / "a", jobs=1, umask=0o022,
        env={"TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(base / "a-home"),
             "USER": "builder", "LOGNAME": "builder"})
    second = Conditions(
        name="second", folder=base / "b" / "deeper" / "build-folder", jobs=max(2, os.cpu_count()
                                                                                or 2),
        umask=0o077,
        env={"TZ": "Pacific/Kiritimati", "LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8",
             "HOME": str(base / "b-home"), "USER": "someone-else", "LOGNAME": "someone-else"},
        extra=("--no-ccache",))
    return first, second


def build_under(conditions: Conditions, kit: str, common: Sequence[str],
                log: Callable[[str], None]) -> Built:
    """One `ninfer-kits build` under `conditions`; CheckFailed naming it when it fails."""
    folder = conditions.folder
    folder.mkdir(parents=True, exist_ok=True)
    Path(conditions.env["HOME"]).mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "ninfer_kits", "build", kit, *common,
               "--jobs", str(conditions.jobs), "--dist", str(folder / "dist"),
               "--cache-dir", str(folder / "cache"), *conditions.extra]
    log(f"build {conditions.describe()}")
    env = {**os.environ, **conditions.env}
    # In a session of its own: Ctrl-C reaches repro alone, which hands it on to the build and
    # waits, so the build's own cleanup runs and nothing of it outlives repro.
    process = children.start(command, cwd=folder, env=env, stdout=sys.stderr,
                             stderr=subprocess.STDOUT, umask=conditions.umask)
    code = children.wait_handing_on(process)
    if code != 0:
        # The build's own status: bad input stays 2, the environment 3; anything else is 1.
        failure = {EXIT_BAD_INPUT: BadInput, EXIT_ENVIRONMENT: EnvironmentFailure}.get(
            code, CheckFailed)
        raise failure(f"repro: the {conditions.name} build of {kit} failed (exit "
                      f"{code}); its output is above")
    dist = folder / "dist"
    folders = [path for path in dist.iterdir() if path.is_dir() and not path.name.startswith(".")]
    return Built(conditions, kitdir.read_kit_dir(folders[0]))


def built_revision(built: Built) -> str:
    return buildinfo.read(built.kit.buildinfo_path).revision
