"""Compare two kits (tarballs, kit folders, folders, files) and explain every difference:
`compare(a, b)`, then `render` or `to_json`. Each member is explained by what it is (ELF:
elfdiff; beside a kit folder's tarballs: beside; text: line by line), and what the members
cannot explain is said of the tarball itself. What decides and what is only reported:
docs/repro.md."""

from __future__ import annotations

import posixpath
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ninfer_kits import __version__
from ninfer_kits.errors import BadInput, NotAnElf
from ninfer_kits.inspector.archive import size_words
from ninfer_kits.inspector.elf import ELF_MAGIC
from ninfer_kits.inspector.inputs import ByteSource, printable
from ninfer_kits.kit.buildinfo import RUN_MARKER
from ninfer_kits.kit.kitdir import BUILD_LOG, BUILDINFO, SHA1SUMS, SHA256SUMS
from ninfer_kits.repro import beside, model, sides
from ninfer_kits.repro.elfdiff import diff_data, diff_elf
from ninfer_kits.repro.model import (
    DIFFERS,
    EXPECTED,
    Cause,
    Comparison,
    Extent,
    Limits,
    MemberDiff,
    SectionDiff,
    Side,
)
from ninfer_kits.repro.sides import Member, Tree
from ninfer_kits.repro.textdiff import changed_lines

__all__ = ["Comparison", "Limits", "compare", "render", "to_json"]

LAYOUT_WORDS = {sides.ARCHIVE: "a tarball", sides.KIT_FOLDER: "a kit folder",
                sides.FOLDER: "a folder", sides.FILE: "a single file"}
# Layouts that compare member by member with each other: a tarball and its unpacked folder.
TREES = (sides.ARCHIVE, sides.FOLDER)
HEADER_FIELDS = ("mtime", "uid", "gid", "uname", "gname")


def compare(a: Path, b: Path, limits: Limits | None = None) -> Comparison:
    """Compare two kits, folders or files; BadInput when unreadable or not alike."""
    limits = limits or Limits()
    tree_a, tree_b = sides.read_tree(a, str(a)), sides.read_tree(b, str(b))
    _check_alike(tree_a, tree_b)
    tree_a, tree_b, kit_notes = _kit_files(tree_a, tree_b)
    tree_b, notes = _aligned(tree_a, tree_b)
    notes = [*kit_notes, *notes]
    found: dict[str, MemberDiff] = {}
    pending: list[tuple[Member, Member, list[Cause]]] = []
    same = 0
    for path in _paths(tree_a, tree_b):
        left, right = tree_a.members.get(path), tree_b.members.get(path)
        if _implied_folder(path, left, right, tree_a, tree_b):
            same += 1
            continue
        causes = _by_listing(path, left, right)
        if left is not None and right is not None and _bytes_differ(left, right):
            largest = max(left.side.size, right.side.size)
            if largest <= limits.explain:
                pending.append((left, right, causes))
                continue
            # Not copied out of its tarball, nor read: its sha256 is all that is said.
            causes.append(Cause(model.NOT_EXPLAINED, f"{size_words(largest)}: larger than "
                                                     f"the {size_words(limits.explain)} "
                                                     f"compared here; only its sha256 differs",
                                a=left.side.sha256, b=right.side.sha256))
            found[path] = _member(path, left, right, causes, "", ())
        elif causes:
            found[path] = _member(path, left, right, causes, "", ())
        else:
            same += 1
    with sides.contents() as store:
        store.fetch([member for pair in pending for member in pair[:2]])
        for left, right, causes in pending:
            with store.open(left) as data_a, store.open(right) as data_b:
                kind, sections, explained = _explain(
                    left.path, data_a, data_b, left, right, limits,
                    beside_tarballs=tree_a.layout == sides.KIT_FOLDER and "/" not in left.path)
            found[left.path] = _member(left.path, left, right, [*causes, *explained], kind,
                                       sections)
    archives = _archive_diffs(tree_a, tree_b, found)
    ordered = [*archives, *(found[path] for path in _paths(tree_a, tree_b) if path in found)]
    return Comparison(a=str(a), b=str(b), layout=tree_a.layout, members=tuple(ordered),
                      same=same, notes=tuple(notes))


def _check_alike(tree_a: Tree, tree_b: Tree) -> None:
    alike = tree_a.layout == tree_b.layout or (tree_a.layout in TREES and tree_b.layout in TREES)
    if not alike:
        raise BadInput(f"{printable(tree_a.shown)} is {LAYOUT_WORDS[tree_a.layout]} and "
                       f"{printable(tree_b.shown)} is {LAYOUT_WORDS[tree_b.layout]}: compare two "
                       f"kit tarballs, two kit folders (dist/<tag>/), two folders or two files")


# Files beside a kit's tarballs that a release or a fetch may lack (so do the SBOMs and
# provenance): on one side only not a difference (both SHA256SUMS still list them).
ONE_SIDED = (BUILD_LOG, BUILDINFO, SHA1SUMS)


def _kit_files(tree_a: Tree, tree_b: Tree) -> tuple[Tree, Tree, list[str]]:
    """Two kit folders as far as they are the kit: a file of ONE_SIDED (or a tarball) only one
    holds is dropped, and each thing left out named in a note."""
    if tree_a.layout != sides.KIT_FOLDER:
        return tree_a, tree_b, []
    notes = [f"not the kit's, not compared: {', '.join(tree.left_out)} in {side}"
             for side, tree in (("a", tree_a), ("b", tree_b)) if tree.left_out]
    dropped: dict[str, list[str]] = {"a": [], "b": []}
    one_side = set(tree_a.members) ^ set(tree_b.members)
    for name in (*ONE_SIDED, *sorted(n for n in one_side if beside.is_attestation(n))):
        if name in one_side:
            dropped["a" if name in tree_a.members else "b"].append(name)
    # One tarball of two: a fetch takes one flavour (both SHA256SUMS still name the other).
    roles_a = {archive.role for archive in tree_a.archives}
    roles_b = {archive.role for archive in tree_b.archives}
    trees: list[Tree] = []
    pairs = (("a", "b", tree_a, roles_a, roles_b), ("b", "a", tree_b, roles_b, roles_a))
    for side, other, tree, mine, theirs in pairs:
        alone = [archive for archive in tree.archives if archive.role in mine - theirs]
        if alone and theirs:
            names = [archive.path for archive in alone]
            notes.append(f"{', '.join(names)} only in {side} ({other} holds one of the kit's "
                         f"tarballs): not compared")
            tree = replace(tree, archives=tuple(a for a in tree.archives if a not in alone),
                           members={path: member for path, member in tree.members.items()
                                    if path.partition("/")[0] not in names})
        if dropped[side]:
            notes.append(f"{', '.join(dropped[side])} only in {side} ({other} lacks it, as a "
                         f"published or downloaded kit folder may): not compared")
            tree = replace(tree, members={path: member for path, member in tree.members.items()
                                          if path not in dropped[side]})
        trees.append(tree)
    return trees[0], trees[1], notes


def _aligned(tree_a: Tree, tree_b: Tree) -> tuple[Tree, list[str]]:
    """B's members renamed where they pair with A's under another name: a single file, and a
    kit folder's tarballs (paired by role, plain or portable)."""
    notes: list[str] = []
    renames: dict[str, str] = {}
    if tree_a.layout == sides.FILE:
        renames = {next(iter(tree_b.members)): next(iter(tree_a.members))}
    elif tree_a.layout == sides.KIT_FOLDER:
        by_role = {archive.role: archive.path for archive in tree_a.archives}
        for archive in tree_b.archives:
            mine = by_role.get(archive.role)
            if mine is not None and mine != archive.path:
                renames[archive.path] = mine
                notes.append(f"the {archive.role} tarballs are named apart ({mine} in a, "
                             f"{archive.path} in b): compared as one")
    if not renames:
        return tree_b, notes
    members = {_renamed(path, renames): replace(member, path=_renamed(path, renames))
               for path, member in tree_b.members.items()}
    archives = tuple(replace(archive, path=renames.get(archive.path, archive.path))
                     for archive in tree_b.archives)
    return replace(tree_b, members=members, archives=archives), notes


def _renamed(path: str, renames: dict[str, str]) -> str:
    if path in renames:
        return renames[path]
    head, _, rest = path.partition("/")
    return f"{renames[head]}/{rest}" if head in renames and rest else path


def _paths(tree_a: Tree, tree_b: Tree) -> list[str]:
    return [*tree_a.members, *(path for path in tree_b.members if path not in tree_a.members)]


def _implied_folder(path: str, left: Member | None, right: Member | None, tree_a: Tree,
                    tree_b: Tree) -> bool:
    """A folder on one side only whose members the other holds (a tarball without folder
    entries against its unpacked folder): not a difference."""
    if (left is None) == (right is None):
        return False
    present, other = (left, tree_b) if right is None else (right, tree_a)
    assert present is not None
    return present.side.kind == "folder" and any(
        name.startswith(f"{path}/") for name in other.members)


def _by_listing(path: str, left: Member | None, right: Member | None) -> list[Cause]:
    """What the listing alone says differs: presence, kind, mode, link target."""
    if left is None or right is None:
        kind = model.ONLY_IN_A if right is None else model.ONLY_IN_B
        side = "a" if right is None else "b"
        return [Cause(kind, f"only in {side}")]
    a, b = left.side, right.side
    if a.kind != b.kind:
        return [Cause(model.MEMBER_TYPE, "a different kind of member", a=a.kind, b=b.kind)]
    causes = []
    if a.mode != b.mode and a.kind != "symlink":
        causes.append(Cause(model.MODE, "its permission bits differ", a=f"{a.mode:04o}",
                            b=f"{b.mode:04o}"))
    if a.link != b.link:
        causes.append(Cause(model.LINK_TARGET, f"the {a.kind} points elsewhere", a=a.link,
                            b=b.link))
    return causes


def _bytes_differ(left: Member, right: Member) -> bool:
    return left.side.kind == right.side.kind == "file" and left.side.sha256 != right.side.sha256


def _member(path: str, left: Member | None, right: Member | None, causes: list[Cause],
            kind: str, sections: tuple[SectionDiff, ...]) -> MemberDiff:
    if left is None or right is None:
        status = model.ONLY_IN_A if right is None else model.ONLY_IN_B
    else:
        status = EXPECTED if causes and all(cause.expected for cause in causes) else DIFFERS
    present = left or right
    assert present is not None
    return MemberDiff(path=path, kind=kind or present.side.kind, status=status,
                      a=left.side if left else None, b=right.side if right else None,
                      causes=tuple(causes), sections=sections)


def _explain(path: str, a: ByteSource, b: ByteSource, left: Member, right: Member,
             limits: Limits, *, beside_tarballs: bool = False
             ) -> tuple[str, tuple[SectionDiff, ...], list[Cause]]:
    """What the member is ("elf", "text", "json", "data"), its differing sections, and the
    causes; `beside_tarballs`: a file of a kit folder (repro.beside)."""
    if beside_tarballs and beside.is_attestation(path):
        if max(len(a), len(b)) > limits.document:
            return "json", (), [Cause(model.NOT_EXPLAINED, f"larger than the "
                                                           f"{size_words(limits.document)} "
                                                           f"read here: only its sha256 says "
                                                           f"it differs")]
        return "json", (), beside.attestation_causes(path, bytes(a), bytes(b), limits.lines)
    if a[:4] == ELF_MAGIC and b[:4] == ELF_MAGIC:
        try:
            found = diff_elf(a, b, path, limits)
            return "elf", found.sections, list(found.causes)
        except NotAnElf as error:
            unread = Cause(model.NOT_EXPLAINED, f"not read as ELF: {error}")
            return "data", (), [unread, *diff_data(a, b, limits)]
    texts = _texts(a, b, limits)
    if texts is not None and beside_tarballs and path in (SHA256SUMS, SHA1SUMS):
        sums = beside.sums_causes(path, *texts)
        if sums is not None:
            return "text", (), sums
    if texts is not None:
        return "text", (), _text_causes(posixpath.basename(path), *texts, limits)
    return "data", (), diff_data(a, b, limits)


def _texts(a: ByteSource, b: ByteSource, limits: Limits) -> tuple[str, str] | None:
    if max(len(a), len(b)) > limits.text:
        return None
    raw_a, raw_b = bytes(a), bytes(b)
    if b"\0" in raw_a or b"\0" in raw_b:
        return None
    try:
        return raw_a.decode("utf-8"), raw_b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _text_causes(name: str, a: str, b: str, limits: Limits) -> list[Cause]:
    if name == BUILD_LOG:
        return [Cause(model.BUILD_LOG, "the build log (times, process ids, job order of this "
                                       "run): expected to differ", expected=True)]
    a_lines, b_lines = a.splitlines(), b.splitlines()
    causes = []
    if name == BUILDINFO:
        a_lines, a_run = _split_run(a_lines)
        b_lines, b_run = _split_run(b_lines)
        if a_run != b_run:
            changed = [line for line in (*a_run, *b_run) if line not in a_run or
                       line not in b_run]
            keys = sorted({line.split(":", 1)[0] for line in changed})
            causes.append(Cause(model.RUN_FACTS, f"run facts (expected to differ): the lines "
                                                 f"below '{RUN_MARKER[:14]}…' ({', '.join(keys)})",
                                a="\n".join(line for line in a_run if line not in b_run),
                                b="\n".join(line for line in b_run if line not in a_run),
                                expected=True))
    for hunk in changed_lines(a_lines, b_lines, limits.lines):
        causes.append(Cause(model.TEXT_LINES, f"{hunk.words} differ",
                            a="\n".join(hunk.a_lines), b="\n".join(hunk.b_lines)))
    return causes


def _split_run(lines: list[str]) -> tuple[list[str], list[str]]:
    if RUN_MARKER in lines:
        at = lines.index(RUN_MARKER)
        return lines[:at], lines[at + 1:]
    return lines, []


def _archive_diffs(tree_a: Tree, tree_b: Tree, found: dict[str, MemberDiff]
                   ) -> list[MemberDiff]:
    """What two tarballs' own bytes say beyond their members (headers, order, compression)."""
    b_archives = {archive.path: archive for archive in tree_b.archives}
    diffs = []
    for archive in tree_a.archives:
        other = b_archives.get(archive.path)
        if other is None or other.sha256 == archive.sha256:
            continue
        prefix = f"{archive.path}/" if archive.path else ""
        causes = _header_causes(tree_a, tree_b, prefix)
        if archive.order != other.order and set(archive.order) == set(other.order):
            causes.append(Cause(model.ARCHIVE_HEADER, "the same members in another order (a "
                                                      "deterministic tarball sorts them)"))
        if archive.head[:3] == other.head[:3] == b"\x1f\x8b\x08" and (
                archive.head != other.head):
            causes.append(Cause(model.ARCHIVE_HEADER, "the gzip headers differ (its mtime, "
                                                      "flags or OS byte; gzip -n leaves them 0)",
                                a=archive.head.hex(" "), b=other.head.hex(" ")))
        inside = any(path.startswith(prefix) for path in found)
        if not causes and not inside:
            causes.append(Cause(model.ARCHIVE_HEADER, "the tarballs differ while every member "
                                                      "and header is the same: another "
                                                      "compressor or compression level"))
        if causes:
            name = archive.path or archive.file.name
            diffs.append(MemberDiff(path=name, kind="archive", status=DIFFERS,
                                    a=Side("file", size=archive.file.stat().st_size,
                                           sha256=archive.sha256),
                                    b=Side("file", size=other.file.stat().st_size,
                                           sha256=other.sha256),
                                    causes=tuple(causes)))
    return diffs


def _header_causes(tree_a: Tree, tree_b: Tree, prefix: str) -> list[Cause]:
    """One cause per tar header field that differs, the first member as example."""
    counts: dict[str, int] = {}
    example: dict[str, tuple[str, str, str]] = {}
    for path, left in tree_a.members.items():
        right = tree_b.members.get(path)
        if not path.startswith(prefix) or right is None or not left.header or not right.header:
            continue
        for name in HEADER_FIELDS:
            x, y = getattr(left.header, name), getattr(right.header, name)
            if x != y:
                counts[name] = counts.get(name, 0) + 1
                example.setdefault(name, (path, str(x), str(y)))
    return [Cause(model.ARCHIVE_HEADER, f"the tar header field {name} differs in "
                                        f"{counts[name]} member(s), e.g. {example[name][0]}",
                  a=example[name][1], b=example[name][2]) for name in HEADER_FIELDS
            if name in counts]


def to_json(comparison: Comparison) -> dict[str, Any]:
    """The versioned document `diff --json` prints; data/diff.schema.json describes it."""
    return {
        "schema_version": model.SCHEMA_VERSION,
        "tool": f"ninfer-kits {__version__}",
        "a": comparison.a,
        "b": comparison.b,
        "layout": comparison.layout,
        "identical": comparison.identical,
        "same_members": comparison.same,
        "notes": list(comparison.notes),
        "members": [_member_json(member) for member in comparison.members],
    }


def _member_json(member: MemberDiff) -> dict[str, Any]:
    """A member as the schema has it: the dataclasses' own fields, but a section's ranges."""
    return {
        "path": member.path, "kind": member.kind, "status": member.status,
        "a": _fields(member.a), "b": _fields(member.b),
        "sections": [{
            "name": section.name, "a": _fields(section.a), "b": _fields(section.b),
            "first_offset": section.first_offset,
            "ranges": [list(pair) for pair in section.ranges], "more_ranges": section.more,
        } for section in member.sections],
        "causes": [asdict(cause) for cause in member.causes],
    }


def _fields(value: Side | Extent | None) -> dict[str, Any] | None:
    return None if value is None else asdict(value)


def render(comparison: Comparison) -> str:
    """The comparison in words: one block per member that differs, each cause on its own."""
    lines = [f"a: {printable(comparison.a)}", f"b: {printable(comparison.b)}"]
    lines += [f"note: {printable(note)}" for note in comparison.notes]
    for member in comparison.members:
        lines += ["", *_member_lines(member)]
    lines += ["", _verdict(comparison)]
    return "\n".join(lines) + "\n"


def _member_lines(member: MemberDiff) -> list[str]:
    status = {model.ONLY_IN_A: "only in a", model.ONLY_IN_B: "only in b",
              EXPECTED: "differs only where expected"}.get(member.status, "differs")
    head = f"{printable(member.path)} ({member.kind}): {status}"
    if member.a and member.b and member.a.sha256 and member.b.sha256 and (
            member.a.sha256 != member.b.sha256):
        head += (f"; sha256 {member.a.sha256[:12]}… vs {member.b.sha256[:12]}…, "
                 f"{member.a.size} vs {member.b.size} bytes")
    lines = [head]
    if member.sections:
        lines.append("  sections: " + ", ".join(_section_words(s) for s in member.sections))
    for cause in member.causes:
        where = f" [{printable(cause.section)}]" if cause.section else ""
        lines.append(f"  - {cause.kind}{where}: {printable(cause.detail)}")
        for label, value in (("a", cause.a), ("b", cause.b)):
            if value is not None:
                rows = value.splitlines() or [""]
                lines.append(f"      {label}: {printable(rows[0])}")
                lines += [f"         {printable(row)}" for row in rows[1:]]
    return lines


def _section_words(section: SectionDiff) -> str:
    if section.a is None or section.b is None:
        return f"{section.name} (only in {'b' if section.a is None else 'a'})"
    words = []
    if section.first_offset is not None:
        count = f"{len(section.ranges)}{'+' if section.more else ''}"
        words.append(f"from +{section.first_offset:#x}, {count} range(s)")
    if section.a.size != section.b.size:
        words.append(f"{section.a.size} vs {section.b.size} bytes")
    return f"{section.name} ({'; '.join(words)})" if words else section.name


def _verdict(comparison: Comparison) -> str:
    expected = sum(member.status == EXPECTED for member in comparison.members)
    expected_words = (f"; {expected} member(s) differ only where expected (what records the "
                      f"run, not the kit: run facts, the build log, checksums of files beside "
                      f"the tarballs, the attestations beyond their subject)" if expected
                      else "")
    if comparison.identical:
        return f"identical: {comparison.same} member(s) the same{expected_words}"
    differ = len(comparison.members) - expected
    return (f"differ: {differ} member(s) differ, {comparison.same} the same"
            f"{expected_words}")
