"""Whether a strong undefined symbol binds, as glibc's loader binds it with LD_BIND_NOW=1: looked
up by name in the global scope (the program, then its libraries breadth first), each candidate
judged as dl-lookup.c's check_match judges it.

- A definition is a global, weak or unique symbol of a code or data type, with a value (or
  absolute, or TLS); an undefined entry is none, whatever its value.
- A versioned reference (`name@VER`) binds to a definition of that version, or to one of the
  base or no version unless the reference's version is hidden; a library without a symbol
  version table takes any reference (binding to the very library the version is needed from
  stops at an assertion instead, which loader.resolve counts as the version missing).
- An unversioned reference binds to a definition of the base or the oldest version (index 2),
  or, where a library has exactly one non-hidden definition of another version, to that one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ninfer_kits.inspector.elfsymbols import DynamicSymbols, Reference


@dataclass(frozen=True)
class UnboundSymbol:
    """A strong undefined symbol of a kit file that no library in the program's scope defines:
    the program stops at its first use ("symbol lookup error: …: undefined symbol: NAME"), or
    at its start with LD_BIND_NOW=1."""

    name: str
    version: str  # "" unversioned
    library: str  # the library the version is needed from; "" unversioned
    needed_by: str
    searched: tuple[str, ...]  # the global scope, in load order (paths in the target)


def binds(reference: Reference, symbols: DynamicSymbols | None) -> bool:
    """Whether the loader binds `reference` to a definition of this object."""
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
