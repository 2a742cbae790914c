"""One home for the environment variables (issue 41): src/ninfer_kits/config/settings.py declares
each, the other modules read them through it, docs/settings.md is made from it, and `ninfer-kits
settings` lists them without ever showing a secret."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ninfer_kits import cli
from ninfer_kits.config import settings
from ninfer_kits.net.retry import RetryPolicy

from tools import ROOT

SRC = ROOT / "src" / "ninfer_kits"
PAGE = ROOT / "docs" / "settings.md"
HOME = SRC / "config" / "settings.py"
OURS = re.compile(r"NINFER_KITS_[A-Z0-9_]*[A-Z0-9]|NINFER_B2_ENV")
BLOCK = re.compile(r"<!-- made by: ninfer-kits settings --markdown -->\n(.*?)"
                   r"<!-- end of: ninfer-kits settings --markdown -->", re.S)


def modules() -> list[Path]:
    return sorted(path for path in SRC.rglob("*.py") if path != HOME)


def own_reads(source: str) -> list[str]:
    """The environment reads in `source` that bypass settings.read, and each string constant
    that is a variable's whole name: `os.environ.get("X")`, `os.environ["X"]`,
    `os.getenv("X")`, `environ.get("X")`, `env.get("X")`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and OURS.fullmatch(node.value):
            found.append((node.lineno, f"{node.value!r}"))
        key = _read_key(node)
        if key is not None and isinstance(node, ast.expr):
            found.append((node.lineno, f"reads {key!r} itself"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _read_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        function = ast.unparse(node.func)
        if function in ("os.getenv", "os.environ.get", "environ.get", "env.get"):
            return str(node.args[0].value)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
            and isinstance(node.slice, ast.Constant) and ast.unparse(node.value) == "os.environ":
        return str(node.slice.value)
    return None


def test_each_variable_is_declared_once_and_listed() -> None:
    names = [setting.name for setting in settings.SETTINGS]
    assert len(names) == len(set(names))
    declared = {value for value in vars(settings).values() if isinstance(value, settings.Setting)}
    assert declared == set(settings.SETTINGS)
    assert {setting.reader for setting in settings.SETTINGS} <= set(settings.READERS)
    assert all(setting.meaning and setting.default for setting in settings.SETTINGS)


def test_no_other_module_reads_a_variable_itself() -> None:
    offences = {str(path.relative_to(ROOT)): found for path in modules()
                if (found := own_reads(path.read_text(encoding="utf-8")))}
    assert offences == {}


def test_the_check_finds_a_module_that_reads_one_itself() -> None:
    source = ('import os\nos.environ.get("NINFER_KITS_CACHE")\nos.environ["HOME"]\n'
              'def f(environ):\n    return environ.get("CI")\nNAME = "NINFER_KITS_NEW"\n'
              'os.environ["PATH"] = "/bin"\n"""NINFER_KITS_MATRIX, in prose, is fine."""\n')
    assert own_reads(source) == [
        "line 2: 'NINFER_KITS_CACHE'", "line 2: reads 'NINFER_KITS_CACHE' itself",
        "line 3: reads 'HOME' itself", "line 5: reads 'CI' itself",
        "line 6: 'NINFER_KITS_NEW'"]


def named_anywhere() -> list[Path]:
    """The repository's own text: the docs, the code, the scripts, CI, the tests (all but this
    one, whose toy module names a variable no one declares)."""
    folders = ("docs", "src", "scripts", ".github", ".ci", "tests", "build", "releases")
    found = [path for folder in folders for path in (ROOT / folder).rglob("*")
             if path.is_file() and path.suffix in ("", ".md", ".py", ".sh", ".yml", ".toml")
             and "regressions" not in path.parts and "__pycache__" not in path.parts]
    tops = [ROOT / name for name in ("README.md", "DEVELOPING.md", "matrix.toml", "noxfile.py")]
    return [path for path in [*found, *tops] if path != Path(__file__).resolve()]


def test_every_name_anywhere_is_declared() -> None:
    declared = {setting.name for setting in settings.SETTINGS}
    used = {(name, str(path.relative_to(ROOT))) for path in named_anywhere()
            for name in OURS.findall(path.read_text(encoding="utf-8", errors="replace"))}
    assert sorted(pair for pair in used if pair[0] not in declared) == []
    assert {name for name, _ in used} >= {"NINFER_KITS_DEBIAN_MIRROR", "NINFER_KITS_MATRIX"}


def test_the_page_is_made_from_the_list() -> None:
    """docs/settings.md's tables are `ninfer-kits settings --markdown`, so each variable is on
    it with its meaning and default; after a change, paste that command's output there."""
    block = BLOCK.search(PAGE.read_text(encoding="utf-8"))
    assert block is not None, f"{PAGE} has no block made by ninfer-kits settings --markdown"
    assert block.group(1) == settings.markdown()
    for setting in settings.SETTINGS:
        assert f"| `{setting.name}` | {setting.meaning}" in block.group(1)
        assert f"| {setting.default} |\n" in block.group(1)


def test_the_listing_shows_values_but_never_a_secret(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for setting in settings.SETTINGS:
        monkeypatch.delenv(setting.name, raising=False)
    secrets = {setting.name: f"s3cret-{setting.name.lower()}" for setting in settings.SETTINGS
               if setting.secret}
    assert set(secrets) >= {"GITHUB_TOKEN", "GH_TOKEN", "B2_APPLICATION_KEY",
                            "NINFER_KITS_SIGNING_KEY"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NINFER_KITS_INDEX", "/srv/index.json")
    assert cli.main(["settings"]) == 0
    shown = capsys.readouterr().out
    assert not [value for value in secrets.values() if value in shown]
    lines = [" ".join(line.split()) for line in shown.splitlines()]
    for name in secrets:
        assert f"{name} set (a secret, not shown)" in lines
    assert "NINFER_KITS_INDEX '/srv/index.json'" in lines
    assert "NINFER_KITS_MATRIX unset: ./matrix.toml, else the copy inside ninfer-kits.pyz" \
        in lines
    workflows = [s.name for s in settings.SETTINGS if s.reader != settings.PROGRAM]
    assert workflows and not [name for name in workflows if name in shown]


def test_a_module_reads_the_environ_it_is_handed() -> None:
    """The injectability the modules had stays: a mapping given is read, not os.environ."""
    assert RetryPolicy.from_environment({"NINFER_KITS_RETRY_SCALE": "0"}).scale == 0.0
    assert RetryPolicy.from_environment({}).scale == 1.0
    assert settings.read(settings.MATRIX, {"NINFER_KITS_MATRIX": ""}) == ""
    assert settings.read(settings.MATRIX, {}) is None
