"""The manual's claims held to what the program does, where the program can say it without a
compile: each command's options against its page, the options a page names against the
commands', README's exit status table against `ninfer-kits --help`'s, docs/build.md's kit folder
against what kitdir says a kit folder holds, and the zipapp's size against a fresh one. The
console blocks themselves run in tests/test_readme.py; this reads the prose and the tables.
Issue 39 found "exactly these five files (six for a portable kit)" where a build makes ten,
and a zipapp "about 430 KB" of 540."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ninfer_kits.cli import SUBCOMMANDS, build_parser
from ninfer_kits.kit import flavours, kitdir

from tools import ROOT

DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
# The page of a command without one of its own.
PAGE_OF = {"kit-url": "fetch", "diff": "repro", "alert": "watch", "summary": "watch"}
# Options every command has (cli.build_parser), and those of ninfer-kits' other entry points.
GLOBAL = {"--help", "--version", "--debug"}
OTHER_ENTRY_POINTS = {
    "--no-matrix": "python -m ninfer_kits.zipapp",
    "--tests": "python -m ninfer_kits.pipeline.hostdeps",
    "--minutes": "tests/fuzz/run.py (nox -s fuzz)",
    "--durations": "pytest",
}
# Options of other programs that pages quote, each with the program.
OTHER_TOOLS = {
    "--ignore-missing": "sha256sum -c", "--include": "debootstrap (make-base-image.sh)",
    "--network": "docker run", "--build-arg": "docker build", "--no-cache": "docker build",
    "--volumes": "docker compose down", "--user": "pip install", "--prefix": "pip install",
    "--require-hashes": "pip install", "--format": "ssh-keygen / cosign", "--repo": "gh",
    "--signer-workflow": "gh attestation verify", "--input-file": "cyclonedx-cli",
    "--input-version": "cyclonedx-cli", "--compress-mode": "libdeflate's gzip benchmark",
    "--list-ptx": "cuobjdump", "--list-elf": "cuobjdump", "--enable-gpl": "FFmpeg's configure",
    "--download-only": "apt-get", "--print-uris": "apt-get", "--once": "uscan",
    "--password-stdin": "docker login", "--name": "scripts/start-docker-engine.sh",
}
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def options_of(command: str) -> set[str]:
    """The long options `ninfer-kits COMMAND --help` lists, from the parser that prints it."""
    parser = build_parser([command])
    sub = next(action for action in parser._actions
               if isinstance(action, argparse._SubParsersAction))
    return _long_options(sub.choices[command])


def _long_options(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's long options, and those of its actions' own parsers (`toolchain push`)."""
    found = {option for action in parser._actions for option in action.option_strings
             if option.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found |= _long_options(child)
    return found


EVERY = {command: options_of(command) for command in SUBCOMMANDS}


def page_of(command: str) -> Path:
    return DOCS / f"{PAGE_OF.get(command, command)}.md"


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_of_a_command_is_on_its_page(command: str) -> None:
    page = page_of(command)
    named = set(OPTION.findall(page.read_text(encoding="utf-8")))
    missing = sorted(EVERY[command] - GLOBAL - named)
    assert not missing, f"{page.relative_to(ROOT)} does not name {command}'s {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_option_a_page_names_is_one(page: Path) -> None:
    known = set().union(*EVERY.values()) | GLOBAL | set(OTHER_ENTRY_POINTS) | set(OTHER_TOOLS)
    unknown = sorted(set(OPTION.findall(page.read_text(encoding="utf-8"))) - known)
    assert not unknown, f"{page.relative_to(ROOT)} names options no command has: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_command_line_on_a_page_uses_that_commands_options(page: Path) -> None:
    """`ninfer-kits CMD … --opt` in a code block: --opt is CMD's (up to a comment, a pipe or
    the next command)."""
    wrong = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            for match in re.finditer(r"ninfer-kits(?:\.pyz)? ([a-z][a-z-]*)([^#|;&]*)", line):
                command, rest = match.groups()
                if command not in EVERY:
                    continue
                wrong += [f"{command} {option}" for option in OPTION.findall(rest)
                          if option not in EVERY[command] | GLOBAL]
    assert not wrong, f"{page.relative_to(ROOT)}: {wrong}"


def help_exit_table() -> list[tuple[int, str]]:
    shown = subprocess.run([sys.executable, "-m", "ninfer_kits", "--help"], capture_output=True,
                           text=True, check=True).stdout
    table = shown[shown.index("exit status:\n") + len("exit status:\n"):]
    rows: list[tuple[int, str]] = []
    for line in table.splitlines():
        row = re.match(r"  (\d+) +(.*)", line)
        if row:
            rows.append((int(row[1]), row[2]))
        elif line.startswith(" " * 7) and rows:
            rows[-1] = (rows[-1][0], f"{rows[-1][1]} {line.strip()}")
    return rows


def readme_exit_table() -> list[tuple[int, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Exit status"):]
    section = section[:section.index("\n## ", 3)]
    return [(int(code), meaning.replace("`", ""))
            for code, meaning in re.findall(r"^\| `(\d+)` \| (.*) \|$", section, re.M)]


def test_readmes_exit_status_table_is_helps() -> None:
    """The same statuses in the same order, each meaning the same (its words up to the first
    colon; README then gives more examples than --help's width allows)."""
    shown, readme = help_exit_table(), readme_exit_table()
    assert [code for code, _ in readme] == [code for code, _ in shown]
    for (code, said), (_, written) in zip(shown, readme, strict=True):
        assert written.split(":")[0] == said.split(":")[0], code


def kit_folder_files(asset: str, portable: bool, owes: bool = False) -> list[str]:
    """What kitdir says a kit folder as `build` leaves it holds: each tarball with its SBOM and
    provenance, FIXED_FILES, and the record of the sources a portable kit owes."""
    tarballs = (asset, flavours.PORTABLE.asset(asset)) if portable else (asset,)
    owed = (kitdir.OWED,) if owes else ()
    return sorted([*tarballs, *kitdir.attestation_names(tarballs), *kitdir.FIXED_FILES, *owed])


BUILD_PAGE = DOCS / "build.md"


def test_build_pages_example_lists_a_portable_kit_folder() -> None:
    # The example kit is portable (matrix.toml) and bundles Debian's FFmpeg (LGPL): its folder,
    # as the page's output shows it (and a build here printed, 2026-12-07).
    text = BUILD_PAGE.read_text(encoding="utf-8")
    kit_line = re.search(r"^kit +\S+/([^/\s]+)$", text, re.M)
    files_line = re.search(r"^files +(.+)$", text, re.M)
    assert kit_line and files_line
    assert files_line[1].split(", ") == kit_folder_files(kit_line[1], portable=True, owes=True)


def test_build_page_counts_and_tabulates_the_kit_folder() -> None:
    text = BUILD_PAGE.read_text(encoding="utf-8")
    counts = re.search(r"exactly these files, (\w+)\s+for a plain kit and (\w+) for a portable"
                       r" one.*?\s(\w+) where the portable kit owes", text, re.S)
    assert counts, "docs/build.md no longer says how many files a kit folder holds"
    asset = "ninfer-example-kit-v0.3.0-sm86.tar.gz"
    plain, portable = kit_folder_files(asset, False), kit_folder_files(asset, True)
    owing = kit_folder_files(asset, True, owes=True)
    assert [NUMBERS[word] for word in counts.groups()] == [len(plain), len(portable), len(owing)]
    table = text[text.index("| file | what it is |"):]
    table = table[:table.index("\n\n")]
    patterns = [re.compile(re.sub(r"<[^>]+>", ".+", re.escape(name).replace(r"\<", "<")
                                  .replace(r"\>", ">")) + "$")
                for row in table.splitlines()[2:]
                for name in re.findall(r"`([^`]+)`", row.split(" | ")[0])]
    for name in owing:
        assert any(pattern.match(name) for pattern in patterns), f"no row for {name}"
    for pattern in patterns:  # a folder's row (sources/) names what no built example holds
        assert pattern.pattern.endswith("/$") or any(pattern.match(name) for name in owing), \
            f"a row for none: {pattern}"


def test_a_kit_folder_made_as_build_makes_one_holds_those_files(tmp_path: Path,
                                                                 program: Path) -> None:
    from test_publish_support import ASSET, make_kit

    for portable in (False, True):
        made = make_kit(tmp_path / f"dist-{portable}", program, portable=portable,
                        attested=True, manifest=True)
        kitdir.read_kit_dir(made.path, built=True)  # the layout kitdir checks
        assert sorted(path.name for path in made.path.iterdir()) == \
            kit_folder_files(ASSET, portable)


def test_the_zipapps_size_is_the_one_the_docs_state(tmp_path: Path) -> None:
    stated = [(page, int(size.replace(",", ""))) for page in PAGES
              for size in re.findall(r"zipapp \(about ([\d,]+) KB\)",
                                     page.read_text(encoding="utf-8"))]
    assert stated, "no page states the zipapp's size any more"
    output = tmp_path / "ninfer-kits.pyz"
    subprocess.run([sys.executable, "-m", "ninfer_kits.zipapp", "-o", str(output)], cwd=ROOT,
                   check=True, capture_output=True)  # as `nox -s pyz` makes it
    size = output.stat().st_size / 1000
    for page, kb in stated:
        assert abs(kb - size) <= 0.1 * size, f"{page.name}: about {kb} KB; it is {size:.0f} KB"


def test_the_pages_name_the_commands_the_zipapp_runs_and_those_it_does_not() -> None:
    from ninfer_kits.release import pyz

    fetch_page = (DOCS / "fetch.md").read_text(encoding="utf-8")
    runs = re.search(r"zipapp \(about [\d,]+ KB\) that runs (.*?) with nothing", fetch_page, re.S)
    assert runs and set(re.findall(r"`([a-z-]+)`", runs[1])) == set(pyz.COMMANDS)
    refused = re.search(r"importtime`; (.*?) from the zipapp say", fetch_page, re.S)
    assert refused and set(re.findall(r"`([a-z-]+)`", refused[1])) == set(pyz.NEEDS_FULL)
    for extra in set(pyz.EXTRAS.values()):
        assert f"[{extra}]" in fetch_page, extra
    row = re.search(r"^\| `ninfer-kits.pyz` \| the client \((.*?)\)",
                    (DOCS / "release.md").read_text(encoding="utf-8"), re.M)
    assert row and set(re.findall(r"`([a-z-]+)`", row[1])) == set(pyz.COMMANDS)


def test_the_example_kit_folders_checksummed_files_are_counted_right() -> None:
    # `floor` and `verify` on dist/<tag>/ say "SHA256SUMS ok (N files)": what SHA256SUMS lists,
    # every file of the folder but itself, SHA1SUMS and build.log (it said 7 after SOURCES.json)
    unlisted = {kitdir.SHA256SUMS, kitdir.SHA1SUMS, kitdir.BUILD_LOG}
    listed = [name for name in kit_folder_files("ninfer-example-kit-v0.3.0-sm86.tar.gz", True,
                                                owes=True) if name not in unlisted]
    said = [(page.name, int(count)) for page in PAGES for count in re.findall(
        r"dist/example-v0\.3\.0-linux-sm86 \(SHA256SUMS ok \((\d+) files\)",
        page.read_text(encoding="utf-8"))]
    assert said, "no page shows floor's or verify's line for the example's kit folder"
    assert all(count == len(listed) for _, count in said), (said, len(listed))
