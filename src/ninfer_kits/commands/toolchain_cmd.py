"""`ninfer-kits toolchain push ID | stale`: a toolchain's images pushed and pinned, or which pins
are missing or stale (docs/toolchain.md)."""

from __future__ import annotations

import argparse
import json
import sys

from ninfer_kits.config.tables import printable
from ninfer_kits.config.toml_text import InvalidToml, with_keys
from ninfer_kits.errors import BadInput, CheckFailed, NinferKitsError
from ninfer_kits.files import atomic
from ninfer_kits.host.engine import connect, engine_guard
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix, add_matrix_argument, load_matrix
from ninfer_kits.matrix.load import matrix_from_text
from ninfer_kits.oci.reference import check_prefix
from ninfer_kits.pipeline.toolchain_pins import push_toolchain, stale_pins


def configure_parser(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    push = actions.add_parser("push", help="build (or reuse) a toolchain's images, push them "
                                           "and their bases, print the pins for matrix.toml")
    push.add_argument("toolchain", help="a toolchain of matrix.toml ([toolchains.ID])")
    add_matrix_argument(push)
    push.add_argument("--to", metavar="PREFIX", default=None,
                      help="the registry and path to push under (default: [registry] prefix "
                           "of the matrix), such as ghcr.io/OWNER")
    push.add_argument("--write", action="store_true",
                      help="write the pins into the matrix file's [toolchains.ID] table")
    stale = actions.add_parser("stale", help="the kits' toolchains whose pins are missing or "
                                             "were made from another recipe")
    add_matrix_argument(stale)
    stale.add_argument("--json", action="store_true", help="as JSON (the workflow's input)")


def execute(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    return _push(args, matrix) if args.action == "push" else _stale(args, matrix)


def _stale(args: argparse.Namespace, matrix: Matrix) -> int:
    found = stale_pins(matrix.kits.values())
    if args.json:
        document = {"schema_version": 1, "stale": [
            {"toolchain": item.toolchain, "key": item.key, "reason": item.reason}
            for item in found]}
        sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    else:
        for item in found:
            sys.stdout.write(f"{item.toolchain}: {item.key} {item.reason}\n")
        if not found:
            sys.stdout.write("every toolchain of the matrix's kits is pinned to its recipe\n")
    return 0


def _push(args: argparse.Namespace, matrix: Matrix) -> int:
    toolchain = matrix.toolchain(args.toolchain)
    prefix = _prefix(args.to, matrix)
    reporter = Reporter()
    with engine_guard():
        pins = push_toolchain(connect(), toolchain, prefix, reporter)
    table = f"toolchains.{toolchain.id}"
    sys.stdout.write(f"[{table}]\n" + "".join(f'{key} = "{pin}"\n' for key, pin in pins))
    sys.stdout.flush()
    if args.write:
        _write(matrix, table, pins)
        reporter.info(f"{matrix.path}: [{table}] now pins {', '.join(key for key, _ in pins)}")
    return 0


def _prefix(given: str | None, matrix: Matrix) -> str:
    prefix = (given or (matrix.registry.prefix if matrix.registry else "")).rstrip("/")
    if not prefix:
        raise BadInput(f"where to push: give --to REGISTRY/PATH (such as ghcr.io/OWNER), or "
                       f"prefix in the [registry] table of {matrix.path}")
    try:
        check_prefix(prefix)
    except ValueError as error:
        raise BadInput(f"--to {printable(prefix[:200])}: {error}") from None
    return prefix


def _write(matrix: Matrix, table: str, pins: list[tuple[str, str]]) -> None:
    """Set the pins in the matrix file. The changed text must read back as a matrix that says
    what was meant, or the file is left as it was (the pins are printed above)."""
    text = matrix.path.read_text(encoding="utf-8")
    toolchain = table.partition(".")[2]
    try:
        changed = with_keys(text, table, pins)
        written = matrix_from_text(matrix.path, changed).toolchain(toolchain)
    except (InvalidToml, NinferKitsError) as error:
        raise CheckFailed(f"{matrix.path}: cannot set the pins in [{table}] ({error}); "
                          f"set them by hand, as printed") from None
    if any(getattr(written, key) != pin for key, pin in pins):
        raise CheckFailed(f"{matrix.path}: the pins set in [{table}] would not read back as "
                          f"written; set them by hand, as printed")
    atomic.write_file(matrix.path, changed.encode("utf-8"))
