"""Whether a strong undefined symbol binds, as glibc's loader binds it with LD_BIND_NOW=1: by name
in the global scope, each candidate judged as dl-lookup.c's check_match judges it (the rules:
docs/verify.md, "Symbol names, not only versions"). A file without a version table binding the
library a version is needed from asserts instead: loader.resolve counts the version missing."""

from __future__ import annotations

from dataclasses import dataclass

from ninfer_kits.inspector.elfsymbols import DynamicSymbols, Reference


@dataclass(frozen=True)
class UnboundSymbol:
    """A kit file's strong undefined symbol that nothing in the program's scope defines."""

    name: str
    version: str  # "" unversioned
    library: str  # the library the version is needed from; "" unversioned
    needed_by: str
    searched: tuple[str, ...]  # the global scope, in load order (paths in the target)


def binds(reference: Reference, symbols: DynamicSymbols | None) -> bool:
    if symbols is None:
        return False
    definitions = symbols.lookup(reference.name)
    if not definitions:
        return False
    if not symbols.versioned:
        return True
    if reference.version:
        return any(d.version == reference.version
                   or (d.version is None and not d.hidden and not reference.hidden)
                   for d in definitions)
    if any(d.index < 3 for d in definitions):
        return True
    return sum(1 for d in definitions if not d.hidden) == 1
