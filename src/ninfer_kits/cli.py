"""The `ninfer-kits` command: one subcommand per job, one error handler at the top."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Protocol

import ninfer_kits
from ninfer_kits import __version__
from ninfer_kits.errors import (
    EXIT_INTERRUPTED,
    EnvironmentFailure,
    NinferKitsError,
    Terminated,
    exit_code_for,
    exit_codes_help,
)


class Subcommand(Protocol):
    def configure_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def execute(self, args: argparse.Namespace) -> int: ...


SUMMARIES: dict[str, str] = {
    "matrix": "show what the pipeline builds (upstream × arch)",
    "inspect": "derive the runtime floor of an ELF file, a folder or a kit tarball",
    "build": "build one matrix entry into a finished kit under dist/",
    "verify": "check whether a kit will run here (a host, a root folder, a Docker image)",
    "floor": "say which known distributions meet a kit's runtime floor, and why",
    "fetch": "download a published kit, check its SHA256SUMS, unpack it and verify it here",
    "kit-url": "print the URL a client fetches a kit from (GitHub release or B2)",
    "publish": "put a finished kit on B2 and GitHub Releases (or a folder), once, verifiably",
    "watch": "say which kits an upstream's move made stale; the rebuild workflow's matrix",
    "diff": "compare two kits (tarballs, kit folders, folders, files) and say why they differ",
    "repro": "build a kit twice under different conditions (or once, --against a published "
             "kit) and compare the bytes",
    "alert": "open (or update) one GitHub issue for a kit whose rebuild fails; close it when "
             "it is fixed",
    "summary": "the rebuild run's summary (built, published, reproduced, skipped, failed) from "
               "each kit's result file",
    "index": "make the kit index (index.json, index.html) again from the ledger, or --check it",
    "toolchain": "push a toolchain's images to a registry and print their pins; say which "
                 "pins are stale",
    "settings": "list the environment variables ninfer-kits reads, and their values here "
                "(never a secret's)",
}


# Each subcommand is a module with configure_parser() and execute(), `commands/<name>_cmd.py`
# (watch's is its package's); imported only when chosen, so that a quick `inspect` does not pay
# for the imports of `build` or `publish`.
SUBCOMMANDS: dict[str, str] = {
    name: f"ninfer_kits.commands.{name.replace('-', '')}_cmd" for name in SUMMARIES
} | {"watch": "ninfer_kits.watch.command"}


def _load(name: str) -> Subcommand:
    module: Subcommand = importlib.import_module(SUBCOMMANDS[name])
    return module


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    epilog = exit_codes_help()
    parser = argparse.ArgumentParser(
        prog="ninfer-kits",
        description="Build, inspect and publish prebuilt NInfer kits.",
        epilog=f"{epilog}\n\nenvironment: `ninfer-kits settings` lists every variable read, "
               f"with its value here",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ninfer-kits {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name, summary in SUMMARIES.items():
        child = sub.add_parser(name, help=summary, description=summary, epilog=epilog,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        child.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                           help="show tracebacks on errors")
        if name == chosen:  # only the chosen command's module is imported
            _load(name).configure_parser(child)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parse_args, except that the subcommand's parser refuses an unknown argument after it,
    with its own usage (argparse leaves it to the top parser's)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        # One before the command (`ninfer-kits --bogus inspect`) is the top parser's to refuse.
        after = argv[argv.index(args.command) + 1:] if args.command in argv else []
        child = _subparser(parser, args.command) if set(extras) <= set(after) else None
        (child or parser).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:  # argparse keeps no other handle on its subparsers
        if isinstance(action, argparse._SubParsersAction):
            child: argparse.ArgumentParser | None = action.choices.get(name)
            return child
    return None


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # run as the program: SIGTERM (a cancelled CI job, `timeout`) as Ctrl-C
        signal.signal(signal.SIGTERM, _terminate)
    return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = _parse(build_parser(args_list), args_list)
    try:
        return _load(args.command).execute(args)
    except NinferKitsError as error:
        _report(error, args.debug)
        return error.exit_code
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM (Terminated): the same cleanup
        what = "terminated (SIGTERM)" if isinstance(interrupt, Terminated) else "interrupted"
        # A note says what was already done: "the kit is in place: dist/<tag>" after the rename.
        notes = "".join(f"; {note}" for note in getattr(interrupt, "__notes__", ()))
        print(f"ninfer-kits: {what}{notes}", file=sys.stderr)
        code: int = getattr(interrupt, "exit_code", EXIT_INTERRUPTED)
        return code
    except BrokenPipeError:
        return 0
    except OSError as error:  # one that no code turned into a message: by what it is about
        _report(error, args.debug)
        return exit_code_for(error)
    except ModuleNotFoundError as error:  # a third-party module of an extra not installed
        missing = missing_module(error, args.command)
        if missing is None or ninfer_kits.FROM_ZIPAPP:
            raise
        _report(missing, args.debug)
        return missing.exit_code


# Third-party modules the plain install lacks: (the distribution to name, the extra with it).
EXTRA_MODULES: dict[str, tuple[str, str]] = {
    "github": ("PyGithub", "publish"), "b2sdk": ("b2sdk", "publish"),
    "requests": ("requests", "publish"),
}


def missing_module(error: ModuleNotFoundError, command: str) -> NinferKitsError | None:
    """The error for a third-party module that is not installed: its extra, or a reinstall for
    a dependency of every install. None for a module of ninfer-kits itself: a bug."""
    top = (error.name or "").partition(".")[0]
    if not top or top == "ninfer_kits":
        return None
    if top in EXTRA_MODULES:
        return extra_missing(top, command)
    return EnvironmentFailure(
        f"`ninfer-kits {command}` needs the Python module {top!r}, which is not installed "
        f"here: reinstall ninfer-kits with its dependencies (from a checkout: pip install .)")


def extra_missing(module: str, command: str) -> NinferKitsError:
    distribution, extra = EXTRA_MODULES[module]
    return EnvironmentFailure(
        f"`ninfer-kits {command}` needs {distribution}, which is not installed here: "
        f"install the {extra!r} extra: pip install 'ninfer-kits[{extra}]' (from a "
        f"checkout: pip install '.[{extra}]')")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _report(error: BaseException, debug: bool) -> None:
    from ninfer_kits.net.remote import redact  # a server may have quoted a secret

    if debug:
        import traceback  # only when asked: it costs start-up time on every run otherwise

        sys.stderr.write(redact("".join(traceback.format_exception(error))))
    said = _os_error_words(error) if isinstance(error, OSError) else str(error)
    print(f"ninfer-kits: error: {redact(said)}", file=sys.stderr)


def _os_error_words(error: OSError) -> str:
    """An OSError no code put in words, said as the others are: `dist/x: a read-only file
    system`, not Python's `[Errno 30] Read-only file system: …`."""
    from ninfer_kits.inspector.inputs import os_error_words, printable

    if error.errno is None or error.filename is None:
        return str(error)  # one of ours (SpoolFailed) or a library's: its own words
    paths = [printable(str(path)) for path in (error.filename, error.filename2) if path]
    return f"{' -> '.join(paths)}: {os_error_words(error)}"
