"""Routine tasks. `nox -s tests` is what CI runs; `nox -s bench` measures against baselines."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite on real binaries (compiles C, C++ and CUDA programs as it goes)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff: style and common bugs."""
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "build", "noxfile.py", *session.posargs)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Mypy in strict mode over the package and this file."""
    session.install("-e", ".[test]", "mypy", "nox")
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks: our code against a named baseline in one run; prints the ratios."""
    session.install("-e", ".[test]")
    session.run("python", "tests/benchmarks/run.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def kit(session: nox.Session) -> None:
    """Build one matrix entry into dist/: `nox -s kit -- KIT [ninfer-kits build options]`."""
    if not session.posargs:
        session.error("name a kit, e.g. `nox -s kit -- example` (`ninfer-kits matrix` lists them)")
    session.install(".")
    session.run("ninfer-kits", "build", *session.posargs)
