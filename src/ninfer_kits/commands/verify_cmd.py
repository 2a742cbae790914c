"""`ninfer-kits verify KIT`: will this kit run here? As the dynamic loader and the CUDA driver
would answer: every library and symbol version resolved on the target, the driver and the GPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.kit.flavours import PORTABLE
from ninfer_kits.kit.licence_policy import line_for
from ninfer_kits.verify.check import verify
from ninfer_kits.verify.kit import SignaturePolicy, open_kit
from ninfer_kits.verify.report import render, to_json
from ninfer_kits.verify.target import open_target


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", type=Path,
                        help="a kit archive (.tar.gz), an unpacked kit, or a kit folder "
                             "(dist/<tag>/, or a published or downloaded release of it); the "
                             "SHA256SUMS beside it is checked first")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", type=Path, help="check a root filesystem instead of this host")
    where.add_argument("--image", help="check a Docker image's filesystem (nothing runs in it)")
    parser.add_argument("--ld-library-path", default=None, metavar="DIRS",
                        help="folders the loader searches first, ':'-separated (default on the "
                             "host: $LD_LIBRARY_PATH; none in a root or an image)")
    parser.add_argument("--json", action="store_true", help="versioned JSON")
    parser.add_argument("--matrix", metavar="PATH", type=Path, default=None,
                        help="the matrix whose [publish.signing] says whether releases are "
                             "signed, and by whom (default: $NINFER_KITS_MATRIX, else "
                             "./matrix.toml, else the copy inside ninfer-kits.pyz)")
    parser.add_argument("--insecure-no-signature", action="store_true",
                        help="go on when SHA256SUMS.sig is missing or bad although the matrix "
                             "says releases are signed (a loud warning)")


def execute(args: argparse.Namespace) -> int:
    ld_path = None if args.ld_library_path is None else tuple(
        folder for folder in args.ld_library_path.split(":") if folder)
    if ld_path and any(not folder.startswith("/") for folder in ld_path):
        raise BadInput(f"--ld-library-path {args.ld_library_path}: give absolute folders")
    policy = signature_policy(args)
    with open_kit(args.kit, signature=policy) as kit, \
            open_target(kit.root, root=args.root, image=args.image,
                        ld_library_path=ld_path) as target:
        report = verify(kit, target)
        portable = kit.info is not None and kit.info.flavour == PORTABLE.name
    if args.json:
        json.dump(to_json(report), sys.stdout, indent=2 if sys.stdout.isatty() else None)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(report) + "\n")
        # information: the licence policy's verdict never changes verify's exit status
        sys.stdout.write(line_for(args.kit, portable) + "\n")
    return report.exit_code


def signature_policy(args: argparse.Namespace) -> SignaturePolicy:
    """How SHA256SUMS.sig is judged: required when the matrix (--matrix, else the one found as
    fetch finds it) has [publish.signing]."""
    from ninfer_kits.fetch.locate import find_matrix
    from ninfer_kits.log import Reporter
    from ninfer_kits.matrix import load_matrix

    path = find_matrix(args.matrix)
    signing = load_matrix(path).publish.signing if path is not None else None
    return SignaturePolicy(trust=signing.trust if signing else None,
                           insecure=args.insecure_no_signature, warn=Reporter().warning)
