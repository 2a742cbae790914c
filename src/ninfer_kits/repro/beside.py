"""The files beside a kit folder's tarballs, judged by what in them follows from the tarballs
alone: SHA256SUMS/SHA1SUMS by the tarballs' lines, an SBOM or provenance by its subject; the
rest records the run, expected to differ (docs/repro.md, the table of what decides)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ninfer_kits.errors import NinferKitsError
from ninfer_kits.kit.kitdir import (
    ATTESTATION_SUFFIXES,
    PROVENANCE_SUFFIX,
    SHA1SUMS,
    SHA256SUMS,
    TARBALL_SUFFIX,
)
from ninfer_kits.release.checksums import SHA256, parse_sums
from ninfer_kits.repro import model
from ninfer_kits.repro.model import Cause

SUMS_WIDTH = {SHA256SUMS: SHA256, SHA1SUMS: 40}
# The JSON paths of an attestation that come from its tarball alone (its name and sha256).
SUBJECT_PATHS = ("subject", "serialNumber", "metadata.component.name",
                 "metadata.component.hashes")
# Keys that name a list's items in a JSON path (components[upstream]), before their index.
ITEM_NAMES = ("bom-ref", "ref", "name")
VALUE_WIDTH = 160  # a value longer than this is shown cut, with its length


def is_attestation(name: str) -> bool:
    return name.endswith(ATTESTATION_SUFFIXES)


def sums_causes(name: str, a: str, b: str) -> list[Cause] | None:
    """SHA256SUMS/SHA1SUMS beside the tarballs; None when either is not one (then: as text)."""
    try:
        listed_a = parse_sums(a, SUMS_WIDTH[name], f"a: {name}")
        listed_b = parse_sums(b, SUMS_WIDTH[name], f"b: {name}")
    except NinferKitsError:
        return None
    names = sorted(set(listed_a) | set(listed_b))
    differing = [file for file in names if listed_a.get(file) != listed_b.get(file)]
    tarballs = [file for file in differing if file.endswith(TARBALL_SUFFIX)]
    others = [file for file in differing if not file.endswith(TARBALL_SUFFIX)]
    causes = []
    if tarballs:
        causes.append(Cause(model.TEXT_LINES, f"the lines of the tarballs differ "
                                              f"({', '.join(tarballs)})",
                            a=_sums_lines(listed_a, tarballs), b=_sums_lines(listed_b, tarballs)))
    if others:
        causes.append(Cause(model.RUN_FACTS, f"the lines of {', '.join(others)}: files beside "
                                             f"the tarballs, which record the run or the "
                                             f"release too (expected to differ; each compares "
                                             f"on its own where both sides hold it)",
                            a=_sums_lines(listed_a, others), b=_sums_lines(listed_b, others),
                            expected=True))
    return causes


def _sums_lines(listed: dict[str, str], names: list[str]) -> str:
    return "\n".join(f"{listed[file]}  {file}" for file in names if file in listed)


def attestation_causes(name: str, a: bytes, b: bytes, shown: int) -> list[Cause]:
    """An SBOM or provenance of both sides, the first `shown` differing values listed."""
    try:
        leaves_a, leaves_b = dict(_leaves(json.loads(a))), dict(_leaves(json.loads(b)))
    except (ValueError, RecursionError) as error:
        return [Cause(model.TEXT_LINES, f"not read as JSON ({type(error).__name__}): an "
                                        f"attestation that cannot be read says nothing of "
                                        f"the kit")]
    paths = [path for path in (*leaves_a, *(p for p in leaves_b if p not in leaves_a))
             if leaves_a.get(path) != leaves_b.get(path)]
    subject = [path for path in paths if path.startswith(SUBJECT_PATHS)]
    recorded = [path for path in paths if path not in subject]
    what = "provenance" if name.endswith(PROVENANCE_SUFFIX) else "SBOM"
    causes = []
    if subject:
        causes.append(Cause(model.SUBJECT, f"the {what} describes another tarball (its "
                                           f"subject: {', '.join(subject[:shown])})",
                            a=_values(leaves_a, subject[:shown]),
                            b=_values(leaves_b, subject[:shown])))
    if recorded:
        more = f", and {len(recorded) - shown} more" if len(recorded) > shown else ""
        causes.append(Cause(model.RUN_FACTS, f"what the {what} records of the run, not of the "
                                             f"tarball (expected to differ): "
                                             f"{len(recorded)} value(s){more}",
                            a=_values(leaves_a, recorded[:shown]),
                            b=_values(leaves_b, recorded[:shown]), expected=True))
    return causes


def _values(leaves: dict[str, str], paths: list[str]) -> str:
    shown = []
    for path in paths:
        value = leaves.get(path, "(absent)")
        if len(value) > VALUE_WIDTH:
            value = f"{value[:VALUE_WIDTH]}… ({len(value)} characters)"
        shown.append(f"{path}: {value}")
    return "\n".join(shown)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(JSON path, the value as JSON) of every scalar, empty list and empty object."""
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list) and value:
        labels = _item_labels(value)
        for label, item in zip(labels, value, strict=True):
            yield from _leaves(item, f"{path}[{label}]")
    else:
        yield path, json.dumps(value, sort_keys=True, ensure_ascii=False)


def _item_labels(items: list[Any]) -> list[str]:
    """A list's items by the name they carry (a bom-ref), so that one item more or less does not
    shift every path after it; by index where the names do not tell them apart."""
    for key in ITEM_NAMES:
        names = [item.get(key) if isinstance(item, dict) else None for item in items]
        if all(isinstance(name, str) for name in names) and len(set(names)) == len(names):
            return [str(name) for name in names]
    return [str(index) for index in range(len(items))]
