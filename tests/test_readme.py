"""The documentation's commands are tests: every `$ ` line of every ```console block of README,
of the pages of docs/ and of DEVELOPING.md (`markdown_files()`: one page after another, so a
page may use what an earlier one made) runs, in order, in one bash session, in a fresh clone of
this repository's committed HEAD, in a clean environment (`env -i`: PATH=/usr/bin:/bin, HOME an
empty folder), with the venv made as README makes it from the machine's /usr/bin/python3; what
each page shows is checked against what happens.

How a page marks what it shows:

- In a console block, the lines under a `$ ` command up to the next one are that command's
  output: they must appear in its output (stdout and stderr together) as one run of lines.
- `<!-- exit: N -->` on the line before a block: every command in it exits N (else 0);
  `<!-- exit: 1 0 1 -->` gives each command of the block its own status, in order; a remark in
  parentheses after the numbers is for the reader.
- `<!-- output of: COMMAND -->` before a ```text block: the block is (a part of) the output of
  the latest run of COMMAND, as it appears in a console block above (without its # comment).
- `varies: hashes, sizes, times, paths, numbers` in either comment (`;` between clauses):
  values of those kinds may differ from the ones shown (another revision, another machine).
- `…` inside a line matches any text; a line that is only `…` or `...` matches any lines.
  Runs of spaces count as one (table columns widen with their values).

A command that cannot run here is in NOT_RUN with the reason; each is reported as a skipped
test (`pytest -rs`, on by default here), so CI's log says why.

The clone is of HEAD: what CI tests is committed content (CI runs on a fresh clone of main);
commit before running this locally.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools import ROOT

pytestmark = pytest.mark.slow

# The pages whose commands build on each other's, in order; any other page of docs/ follows them.
MARKDOWN = ("README.md", "docs/build.md", "docs/portable.md", "docs/repro.md", "docs/publish.md",
            "docs/fetch.md", "docs/verify.md", "docs/floor.md", "docs/matrix.md",
            "docs/inspect.md")
COMMAND_TIMEOUT = 1800.0  # seconds for one command: a cold build on 2 busy cores

# What the pages show but this test does not run, and why: (a regular expression that the whole
# command matches, with its # comment; the reason).
NOT_RUN: tuple[tuple[str, str], ...] = (
    (r"git clone https://github\.com/.*", "GitHub: the test clones this checkout's HEAD"),
    (r"python3 ninfer-kits\.pyz .*", "the .pyz of a release on GitHub (README's curl)"),
    (r"v0\.6\.1-rtx3090-linux-sm86/kit/bin/ninfer .*", "a production kit fetched from GitHub"),
    (r"ninfer-kits publish ninfer-3090-sm86.*",
     "a production kit (its build above cannot run here); publishes to B2 and GitHub"),
    (r"ninfer-kits watch\b.*", "asks GitHub's API for the upstreams' heads"),
    (r"nox -s tests\b.*", "the test suite itself, of which this test is a part"),
    (r"nox -s kit -- ninfer-3090-sm86.*",
     "a production kit: its upstream is on GitHub, and it needs CUDA >= 13.1"),
    (r"scripts/start-docker-engine\.sh.*",
     "starts the machine's Docker engine as root (.ci/run starts it for CI)"),
    (r"ninfer-kits build ninfer-3090-sm86 --builder docker.*",
     "a production kit: its toolchain image comes from a registry, its upstream from GitHub"),
    (r"DOCKER_HOST=ssh://.*", "a remote Docker engine over SSH"),
    (r"ninfer-kits diff A B .*", "a synopsis (A, B: two kits); tests/test_repro_diff.py"),
    (r"ninfer-kits repro example( --against dist/example-v0\.3\.0-linux-sm86/)? .*",
     "cold builds that tests/test_repro.py runs from the project folder as the page shows "
     "them (test_the_example_kit_is_reproducible; --against: test_against_*); not twice "
     "per CI run"),
    (r"GITHUB_TOKEN=… .*ninfer-kits publish example.*", "publishes to B2 and GitHub"),
    (r"ninfer-kits publish .*--github-api https://ghe\.example\.com.*",
     "publishes to a GitHub Enterprise server"),
    (r"ninfer-kits fetch ninfer-3090-sm86.*", "a release on GitHub"),
    (r"ninfer-kits fetch v0\.6\.1-rtx3090-linux-sm86 .*", "a release on GitHub"),
    (r"ninfer-kits fetch example --from b2.*", "a release on B2"),
    (r"curl -fLO https://github\.com/.*", "a release on GitHub"),
    (r"CI=1 python3 ninfer-kits\.pyz fetch .*",
     "a release on GitHub (shown against tests/github_server.py: tests/test_fetch_github.py)"),
    (r"ninfer-kits verify ninfer-3090-kit-v0\.6\.1-sm86\.tar\.gz --root .*",
     "a published production kit and a Debian 13 root folder"),
    (r"ninfer-kits verify .*--root /srv/roots/trixie.*",
     "a Debian 13 root folder (tests/test_verify*.py debootstrap one)"),
    (r"ninfer-kits verify KIT --image .*", "an image from a registry"),
    (r"ninfer-kits floor KIT --facts .*", "a synopsis: a distributions file of your own"),
    (r"ninfer-kits matrix +# with a mistake in matrix\.toml",
     "shows what a mistake in matrix.toml prints (tests/test_matrix.py)"),
)


# ------------------------------------------------------------------------------ the parser


@dataclass(frozen=True)
class Command:
    text: str  # as README shows it, with its # comment
    file: str
    line: int
    shown: tuple[str, ...]  # the lines under it in its console block
    exit: int
    varies: frozenset[str]
    skip: str | None  # why it is not run, else None


@dataclass(frozen=True)
class Shown:
    """A text block marked `output of: COMMAND`."""

    command: str
    file: str
    line: int
    lines: tuple[str, ...]
    varies: frozenset[str]


@dataclass
class _Marks:
    exits: tuple[int, ...] = ()
    output_of: str | None = None
    varies: frozenset[str] = field(default_factory=frozenset)


KINDS = ("paths", "hashes", "sizes", "times", "numbers")  # the order they are replaced in
_MARK = re.compile(r"<!--(.*?)-->\s*$")


def _marks(comment: str, where: str) -> _Marks:
    marks = _Marks()
    for clause in filter(None, (part.strip() for part in comment.split(";"))):
        key, _, value = clause.partition(":")
        key, value = key.strip(), value.strip()
        if key == "exit":
            value = re.sub(r"\(.*\)", "", value)  # a remark for the reader
            marks.exits = tuple(int(number) for number in value.replace(",", " ").split())
        elif key == "output of":
            marks.output_of = value.strip("`")
        elif key in ("made by", "end of"):
            pass  # a generated region (docs/settings.md's tables), compared by its own test
        elif key == "varies":
            marks.varies = frozenset(kind.strip() for kind in value.split(","))
            unknown = marks.varies - set(KINDS)
            assert not unknown, f"{where}: unknown kinds {sorted(unknown)} (known: {KINDS})"
        else:
            raise AssertionError(f"{where}: unknown mark {clause!r}")
    return marks


def plain(command: str) -> str:
    """The command without its trailing # comment (a ` #` after the command's own text)."""
    return re.sub(r"\s+#\s.*$", "", command).strip()


def _skip_reason(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN if re.fullmatch(pattern, command)), None)


def parse(text: str, file: str) -> list[Command | Shown]:
    """Every console command and every marked text block of a Markdown text, in order."""
    steps: list[Command | Shown] = []
    lines = text.split("\n")
    index = 0
    pending = _Marks()
    while index < len(lines):
        line = lines[index]
        mark = _MARK.match(line.strip()) if line.strip().startswith("<!--") else None
        if mark:
            pending = _marks(mark.group(1), f"{file}:{index + 1}")
            index += 1
            continue
        if not line.startswith("```"):
            if line.strip():
                pending = _Marks()
            index += 1
            continue
        language = line[3:].strip()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        body = lines[index + 1:end]
        if language == "console":
            steps += _commands(body, file, index + 2, pending)
        elif pending.output_of is not None:
            steps.append(Shown(pending.output_of, file, index + 2, tuple(body), pending.varies))
        pending = _Marks()
        index = end + 1
    return steps


def _commands(body: list[str], file: str, first: int, marks: _Marks) -> list[Command]:
    starts = [i for i, line in enumerate(body) if line.startswith("$ ")]
    exits = marks.exits or (0,)
    assert len(exits) in (1, len(starts)), \
        f"{file}:{first}: {len(exits)} exit statuses for {len(starts)} commands"
    commands = []
    for number, start in enumerate(starts):
        stop = starts[number + 1] if number + 1 < len(starts) else len(body)
        text = body[start][2:].strip()
        commands.append(Command(
            text=text, file=file, line=first + start, shown=tuple(body[start + 1:stop]),
            exit=exits[number if len(exits) > 1 else 0], varies=marks.varies,
            skip=_skip_reason(text)))
    return commands


# ----------------------------------------------------------------------------- the matcher

_PATTERNS = {
    "paths": re.compile(r"(?<![\w.~…/])/[^\s|,;:()'\"`]+"),
    "hashes": re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"),
    "sizes": re.compile(r"\d[\d,.]*\s?(?:bytes|[kKMG]i?B)\b"),
    "times": re.compile(r"\d+(?:\.\d+)?\s?(?:s|ms|min)\b"),
    "numbers": re.compile(r"\d+(?:[.,]\d+)*"),
}
GAP = ("…", "...")


def normal(line: str, varies: frozenset[str]) -> str:
    for kind in KINDS:
        if kind in varies:
            line = _PATTERNS[kind].sub(f"\x00{kind}\x00", line)
    line = re.sub(r"-{3,}", "---", line)
    return re.sub(r"\s+", " ", line).strip()


def _line_pattern(expected: str, varies: frozenset[str]) -> re.Pattern[str]:
    pieces = normal(expected, varies).split("…")
    return re.compile(".*".join(re.escape(piece) for piece in pieces))


def find(shown: tuple[str, ...], output: str, varies: frozenset[str]) -> bool:
    """Whether the shown lines appear in the output as one run (… lines: any lines between)."""
    expected: list[re.Pattern[str] | None] = [
        None if line.strip() in GAP else _line_pattern(line, varies) for line in shown]
    while expected and expected[-1] is None:
        expected.pop()
    while expected and expected[0] is None:
        expected.pop(0)
    actual = [normal(line, varies) for line in output.splitlines()]

    def at(e: int, a: int) -> bool:
        if e == len(expected):
            return True
        pattern = expected[e]
        if pattern is None:
            return any(at(e + 1, b) for b in range(a, len(actual) + 1))
        return a < len(actual) and pattern.fullmatch(actual[a]) is not None and at(e + 1, a + 1)

    return not expected or any(at(0, a) for a in range(len(actual)))


# ------------------------------------------------------------------------------ the runner


def user_environment(home: Path) -> dict[str, str]:
    """`env -i` plus what a user's shell on this machine has to reach the package index: pip's
    own settings (PIP_*: the certificate bundle, a wheel folder, timeouts) and the TLS trust
    store variables, which this machine's TLS setup needs and which carry no secret. pip's
    config files (/etc/pip.conf, /etc/xdg/pip/pip.conf) are read anyway. Nothing switches the
    portable kit's copyleft sources off: the build only records them, publish fetches them."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "USER": "root",
           "LOGNAME": "root", "SHELL": "/bin/bash"}
    passed = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
    env.update({name: value for name, value in os.environ.items()
                if name.startswith("PIP_") or name in passed})
    return env


class Shell:
    """One bash process fed command after command, as a user types them: `cd` and `source`
    carry over. Each command's stdout and stderr go, together, to a file of its own."""

    def __init__(self, cwd: Path, env: dict[str, str], logs: Path) -> None:
        self.logs = logs
        self.process = subprocess.Popen(
            ["/bin/bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.count = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def run(self, command: str, timeout: float) -> tuple[int, str]:
        self.count += 1
        log = self.logs / f"{self.count:03d}.log"
        marker = f"__readme_test_{self.count}__"
        assert self.process.stdin is not None
        self.process.stdin.write(f"{{ {command}\n}} >{log} 2>&1 </dev/null\n"
                                 f"echo \"{marker} $?\"\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    self.close()
                    return -1, log.read_text(errors="replace") + f"\n[timed out: {timeout} s]"
                continue
            if line.startswith(marker):
                return int(line.split()[1]), log.read_text(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_fork(home: Path, clone: Path) -> None:
    """~/src/my-fork, which docs/build.md builds with --source: the example engine as a
    checkout of its own (as conftest's example_repo makes it)."""
    fork = home / "src" / "my-fork"
    shutil.copytree(clone / "examples" / "engine", fork,
                    ignore=shutil.ignore_patterns("build", "build-*"))
    _git("init", "-q", "-b", "main", cwd=fork)
    _git("add", "-A", cwd=fork)
    _git("-c", "user.name=you", "-c", "user.email=you@example.com", "commit", "-q", "-m",
         "my fork", cwd=fork)


def markdown_files() -> list[str]:
    """MARKDOWN, then the other pages of docs/, then DEVELOPING.md."""
    pages = sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs").glob("*.md"))
    return [*MARKDOWN, *(page for page in pages if page not in MARKDOWN), "DEVELOPING.md"]


def all_steps() -> Iterator[Command | Shown]:
    for name in markdown_files():
        yield from parse((ROOT / name).read_text(), name)


def _not_run() -> list[Command]:
    return [step for step in all_steps() if isinstance(step, Command) and step.skip]


@pytest.mark.parametrize("command", _not_run(), ids=lambda c: f"{c.file}:{c.line}")
def test_what_readme_shows_but_cannot_run_here(command: Command) -> None:
    pytest.skip(f"{command.file}:{command.line} `{plain(command.text)}`: {command.skip}")


def test_every_not_run_entry_names_a_command_readme_shows() -> None:
    commands = [step.text for step in all_steps() if isinstance(step, Command)]
    stale = [pattern for pattern, _ in NOT_RUN
             if not any(re.fullmatch(pattern, text) for text in commands)]
    assert stale == []


def test_the_matcher() -> None:
    output = "x\nsize     1,105,338 bytes (1.1 MB)\nsha256   a7fa9e18\ny\nz\n"
    assert find(("size     1,111,726 bytes (1.1 MB)", "sha256   52924dcb"), output,
                frozenset({"sizes", "hashes"}))
    assert not find(("size     1,111,726 bytes (1.1 MB)",), output, frozenset())
    assert find(("x", "…", "z"), output, frozenset())
    assert not find(("x", "z"), output, frozenset())
    assert find(("size … bytes (1.1 MB)",), output, frozenset())


def test_readme_commands_do_what_readme_says(tmp_path: Path) -> None:
    clone, home, logs = tmp_path / "ninfer-kits", tmp_path / "home", tmp_path / "logs"
    home.mkdir()
    logs.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True,
                   capture_output=True)
    make_fork(home, clone)
    shell = Shell(clone, user_environment(home), logs)
    problems: list[str] = []
    outputs: dict[str, str] = {}
    timings: list[str] = []
    started = time.monotonic()
    try:
        for step in all_steps():
            if isinstance(step, Shown):
                where = f"{step.file}:{step.line} (output of `{step.command}`)"
                if step.command not in outputs:
                    problems.append(f"{where}: that command did not run before it")
                elif not find(step.lines, outputs[step.command], step.varies):
                    problems.append(f"{where}: not in its output:\n{_tail(outputs[step.command])}")
                continue
            if step.skip:
                continue
            begun = time.monotonic()
            status, output = shell.run(step.text, COMMAND_TIMEOUT)
            timings.append(f"{time.monotonic() - begun:7.1f} s  {plain(step.text)}")
            outputs[plain(step.text)] = output
            where = f"{step.file}:{step.line} `{plain(step.text)}`"
            if status != step.exit:
                problems.append(f"{where}: exit status {status}, README says {step.exit}:\n"
                                f"{_tail(output)}")
            elif step.shown and not find(step.shown, output, step.varies):
                problems.append(f"{where}: the lines README shows are not in its output:\n"
                                f"{_tail(output)}")
            if status == -1:
                break
    finally:
        shell.close()
    timings.append(f"{time.monotonic() - started:7.1f} s  in all")
    print("The documentation's commands, timed:\n" + "\n".join(timings))
    assert not problems, "\n\n".join(problems)


def _tail(output: str, lines: int = 40) -> str:
    return "\n".join("    | " + line for line in output.splitlines()[-lines:])
