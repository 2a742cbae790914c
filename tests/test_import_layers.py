"""Imports run one way (DEVELOPING.md, "Where a new job goes"): the floor ← the readers ←
the jobs ← commands/ ← the entry points. Every module under src/ninfer_kits is parsed with
`ast` (nothing is imported), and each `import ninfer_kits…` it makes, at the top or inside a
function, is held to the layers below. What the code did when this test came (issue 41) is
written here as data: the few imports that cross a layer today are named one by one, with why,
so that a new one fails and an old one can only go."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT

PACKAGE = "ninfer_kits"
SRC = ROOT / "src" / PACKAGE

# The top-level modules that start the program: they may import anything.
ENTRY_POINTS = frozenset({"cli", "__main__", "zipapp"})
# The floor's packages: with the other top-level modules (errors, log), what every
# layer stands on. They import one another freely, and nothing above them.
FLOOR = frozenset({"config", "files", "host", "net", "kit", "release"})
# The readers, each allowed the ones before it (and the floor): loader and platforms read ELF
# files through inspector, matrix reads image pins through oci.
READERS = ("oci", "inspector", "loader", "platforms", "matrix")
# The jobs: each stands on the readers and the floor, never on another job or on commands/.
JOBS = frozenset({"pipeline", "publish", "fetch", "verify", "repro", "watch", "alert"})
COMMANDS = "commands"
# The store registry (DEVELOPING.md, "Adding a store"): the matrix, the jobs and commands/ find
# stores through it, and each store's kind reaches its job's code (publish's client, fetch's
# locator) only when called: the one package that may import jobs without being above them.
STORES = "stores"
# The imports that cross a layer today, (importer, imported module) with why; each should move
# its shared part down (DEVELOPING.md) and leave this list.
KNOWN_CROSSINGS: dict[tuple[str, str], str] = {
    ("ninfer_kits.matrix.load", "ninfer_kits.stores"):
        "the matrix reads each store's [publish.NAME] table through its kind",
    ("ninfer_kits.commands.publish_cmd", "ninfer_kits.cli"):
        "publish names the extra a store's missing module needs as the CLI names any",
    ("ninfer_kits.publish.sources", "ninfer_kits.fetch.http"):
        "publish downloads the owed source packages with fetch's stdlib HTTP client",
    ("ninfer_kits.kit.attestations", "ninfer_kits.oci.reference"):
        "the SBOM names the toolchain image by its pin, parsed as the engine reads it",
    ("ninfer_kits.kit.kitmanifest", "ninfer_kits.inspector.archive"):
        "a kit's manifest is read from its tarball in inspector's one streaming pass",
    ("ninfer_kits.kit.kitmanifest", "ninfer_kits.inspector.inputs"):
        "names from a kit shown as inspector shows untrusted text",
    ("ninfer_kits.release.signatures", "ninfer_kits.inspector.inputs"):
        "names from a release shown as inspector shows untrusted text",
    ("ninfer_kits.files.tarsafe", "ninfer_kits.inspector.archive"):
        "extraction shares the archive reader's depth limit and member names",
}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str  # dotted module name (a `from X import name` gives X.name when that is one)
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(root: Path) -> list[Import]:
    """Every import of the package's own modules made by a module under `root`."""
    modules = {module_name(root, path) for path in root.rglob("*.py")}
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(root, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                         else node.module for alias in node.names]
            else:
                continue
            found += [Import(importer, name, node.lineno) for name in names
                      if name == PACKAGE or name.startswith(PACKAGE + ".")]
    return found


def part_of(module: str) -> str:
    """The package a module belongs to under ninfer_kits, or its own name at the top level."""
    return module.split(".")[1] if module.count(".") else module


def refusal(imp: Import, packages: frozenset[str]) -> str | None:
    """Why `imp` goes against the layers (None when it does not); `packages` are the names of
    the sub-packages: FLOOR's and every top-level module are the floor."""
    source, target = part_of(imp.importer), part_of(imp.imported)
    known = (imp.importer, imp.imported) in KNOWN_CROSSINGS
    if source == target or imp.imported == PACKAGE or known:
        return None
    above_floor = packages - FLOOR
    if source not in above_floor:
        if source in ENTRY_POINTS or target not in above_floor:
            return None
        return f"the floor imports {target}"
    if target == COMMANDS or target in ENTRY_POINTS:
        return f"{source} imports {target}, above it"
    if source in (COMMANDS, STORES):
        return None
    if target in JOBS:
        return f"{source} imports the job {target}"
    if source in READERS and target in READERS and READERS.index(target) > READERS.index(source):
        return f"the reader {source} imports {target}, a reader after it"
    return None


def refusals(root: Path) -> list[str]:
    packages = frozenset(path.parent.name for path in root.glob("*/__init__.py"))
    return [f"{imp.importer} (line {imp.line}) imports {imp.imported}: {why}"
            for imp in imports_in(root) if (why := refusal(imp, packages)) is not None]


def test_imports_run_one_way() -> None:
    assert refusals(SRC) == []


def test_the_layers_name_every_package() -> None:
    packages = {path.parent.name for path in SRC.glob("*/__init__.py")}
    assert packages == {*FLOOR, *READERS, *JOBS, COMMANDS, STORES}


def test_each_known_crossing_is_still_made() -> None:
    """An import that left the code leaves the list too, so the list only shrinks."""
    made = {(imp.importer, imp.imported) for imp in imports_in(SRC)}
    assert sorted(set(KNOWN_CROSSINGS) - made) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / PACKAGE


def test_the_check_refuses_an_import_up_or_across(tmp_path: Path) -> None:
    """A toy package with one import of each kind that is refused, and some that are not."""
    package = write(tmp_path, {
        "__init__.py": "", "errors.py": "",
        "cli.py": "from ninfer_kits.commands import build_cmd\n",
        "log.py": "def f():\n    from ninfer_kits.fetch import http\n",
        "commands/__init__.py": "", "commands/build_cmd.py": "import ninfer_kits.pipeline\n",
        "pipeline/__init__.py": "from ninfer_kits import errors\n",
        "fetch/__init__.py": "", "fetch/http.py": "from ninfer_kits.commands import build_cmd\n",
        "publish/__init__.py": "", "publish/stores.py": "from ninfer_kits.fetch.http import x\n",
        "oci/__init__.py": "from ninfer_kits.matrix import load\n",
        "matrix/__init__.py": "from ninfer_kits.oci import reference\n", "matrix/load.py": "",
        "kit/__init__.py": "", "kit/buildinfo.py": "from ninfer_kits.files import atomic\n",
        "files/__init__.py": "", "files/atomic.py": "from ninfer_kits.matrix import load\n",
    })
    assert refusals(package) == [
        "ninfer_kits.fetch.http (line 1) imports ninfer_kits.commands.build_cmd: fetch imports "
        "commands, above it",
        "ninfer_kits.files.atomic (line 1) imports ninfer_kits.matrix.load: the floor imports "
        "matrix",
        "ninfer_kits.log (line 2) imports ninfer_kits.fetch.http: the floor imports fetch",
        "ninfer_kits.oci (line 1) imports ninfer_kits.matrix.load: the reader oci imports "
        "matrix, a reader after it",
        "ninfer_kits.publish.stores (line 1) imports ninfer_kits.fetch.http: publish imports "
        "the job fetch",
    ]
