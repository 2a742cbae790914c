"""index.html, the kit index as a page for people (ninfer_kits.release.kitindex_page): what it
shows, that nothing of the index can run in it, and a real headless Chromium loading it without a
console error, every kit in its DOM, and a screenshot.

The test indexes are made here in index.json's shape and checked against its schema, so that
they stay what `kitindex.document` makes. Chromium comes from Debian's `chromium` package
(data/build_deps.toml, installed by `python -m ninfer_kits.pipeline.hostdeps --tests`); without
it the browser tests fail, naming how to install it, unless NINFER_KITS_SKIP_BROWSER is set.
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ninfer_kits.config.resources import data_file
from ninfer_kits.release import kitindex
from ninfer_kits.release.kitindex_page import render_page

SKIP_BROWSER = "NINFER_KITS_SKIP_BROWSER"
BROWSER_TIMEOUT = 60.0  # seconds for one Chromium run; its process group is killed after
# A console message of the page as Chromium logs it with --enable-logging=stderr
# (`[…:INFO:CONSOLE:1] "Uncaught Error: …", source: file:///… (1)`; older builds write
# CONSOLE(1)), and an uncaught exception however it is worded. Its ERROR: lines about D-Bus
# and the GPU are the machine's, not the page's.
CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught")
PNG = b"\x89PNG\r\n\x1a\n"
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
OWNER = "ninfer-kits/ninfer-kits"
DOWNLOAD = f"https://github.com/{OWNER}/releases/download"


# --------------------------------------------------------------------------- test indexes


def _sha(seed: str, length: int = 64) -> str:
    return (seed.encode().hex() * 64)[:length]


def _asset(tag: str, name: str, size: int) -> dict[str, Any]:
    return {"name": name, "size": size, "sha256": _sha(name), "sha1": _sha(name, 40),
            "urls": {"github": f"{DOWNLOAD}/{tag}/{name}",
                     "b2": f"https://f000.backblazeb2.com/file/ninfer-kits/kits/{tag}/{name}"}}


def _needs(*, glibc: str, sass: Sequence[str], ptx: Sequence[str],
           sonames: Sequence[str]) -> dict[str, Any]:
    return {"glibc": glibc, "versions": {"libc.so.6": [f"GLIBC_{glibc}"],
                                         "libstdc++.so.6": ["GLIBCXX_3.4.30"]},
            "runpath": [],
            "sonames": list(sonames), "sass": list(sass), "ptx": list(ptx),
            "relocatable_sass": [], "relocatable_ptx": []}


def make_kit(tag: str, *, card: str, published: str, portable: bool = False,
             signed: bool = False, reproduced: bool = False, recorded: bool = True,
             pyz: bool = True, github: bool = True) -> dict[str, Any]:
    """A kit as kitindex.document makes it: `recorded=False` is one published before the
    ledger recorded needs and distributions (both null)."""
    stem, arch = f"ninfer-kit-{tag}", "sm_" + tag.rpartition("-sm")[2]
    tarballs = [("plain", f"{stem}.tar.gz", 326_411_000)]
    if portable:
        tarballs.append(("portable", f"{stem}-portable.tar.gz", 401_022_500))
    assets = [_asset(tag, name, size) for _, name, size in tarballs]
    assets += [_asset(tag, name, size) for name, size in
               (("BUILDINFO.txt", 1081), *((("ninfer-kits.pyz", 477_623),) if pyz else ()),
                ("SHA256SUMS", 184))]
    flavours = [{
        "flavour": flavour, "asset": name, "size": size, "sha256": _sha(name),
        "urls": dict(assets[number]["urls"]),
        "needs": _needs(glibc="2.28" if flavour == "portable" else "2.38", sass=[arch],
                        ptx=[arch.replace("sm_", "compute_")],
                        sonames=["libc.so.6"] if flavour == "portable"
                        else ["libc.so.6", "libstdc++.so.6", "libavformat.so.61"])
        if recorded else None,
        "distributions": {"as_of": "2026-11-30",
                          "meets": ["debian-13", "ubuntu-24-04", "fedora-44", "arch"]
                          + (["debian-12", "ubuntu-22-04", "rhel-9"] if flavour == "portable"
                             else []),
                          "not_known": ["rhel-10"]} if recorded else None,
    } for number, (flavour, name, size) in enumerate(tarballs)]
    stores: dict[str, dict[str, str]] = {
        "b2": {"location": f"b2://ninfer-kits/kits/{tag}/", "bucket": "ninfer-kits",
               "prefix": f"kits/{tag}/"}}
    if github:
        stores["github"] = {"location": f"https://github.com/{OWNER}/releases/tag/{tag}",
                            "repository": OWNER, "api": "https://api.github.com",
                            "release_id": "200000001"}
    return {
        "tag": tag, "kit": tag.split("-")[0], "card": card, "upstream": "ninfer/ninfer",
        "upstream_url": "https://github.com/ninfer/ninfer",
        "revision": "9899488d0123456789abcdef0123456789abcdef", "version": "0.6.1",
        "arch": arch, "cuda_version": "13.0.88", "driver_minimum": "580",
        "toolchain": "trixie-cuda130", "published_at": published, "stores": stores,
        "floor": [{"requirement": "x86-64 Linux, glibc ≥ 2.38",
                   "why": "highest versioned symbol referenced is GLIBC_2.38"}],
        "signed_by": "SHA256:Zk3o0yJ5TQnq2cX0vLhQmYbq1D7m5Vb0cW2v9r1m8aQ" if signed else None,
        "reproduction": {"result": "identical", "date": "2026-12-05",
                         "run": "https://github.com/ninfer-kits/ninfer-kits/actions/runs/1",
                         "summary": "rebuilt from source: the same bytes"}
        if reproduced else None,
        "flavours": flavours, "assets": assets, "ledger": f"# releases/{tag}.toml\n",
    }


def make_index(*kits: dict[str, Any]) -> dict[str, Any]:
    index = {"format": kitindex.FORMAT, "kits": list(kits)}
    schema = json.loads(data_file(kitindex.SCHEMA).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(index)  # the test data stays honest
    return index


def three_kits() -> dict[str, Any]:
    """Oldest first, as the index lists them: one published before needs and distributions
    were recorded, one plain and unsigned, one signed, reproduced and with a portable flavour."""
    return make_index(
        make_kit("v0.5.0-rtx3090-linux-sm86", card="GeForce RTX 3090",
                 published="2026-09-14T10:02:11Z", recorded=False, pyz=False, github=False),
        make_kit("v0.6.0-rtx4090-linux-sm89", card="GeForce RTX 4090",
                 published="2026-11-02T08:30:00Z"),
        make_kit("v0.6.1-rtx3090-linux-sm86", card="GeForce RTX 3090",
                 published="2026-12-03T05:49:08Z", portable=True, signed=True,
                 reproduced=True))


def page_text(index: dict[str, Any]) -> str:
    return render_page(index).decode("utf-8")


class Elements(HTMLParser):
    """Every start tag with its attributes, and whether the tags nest as they should."""

    VOID = frozenset({"meta", "br", "img", "hr", "input", "link", "wbr"})

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []
        self.problems: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.problems.append(f"</{tag}> closes nothing open at {self.getpos()}")

    def attributes(self, name: str) -> list[str]:
        return [str(attrs[name]) for _, attrs in self.tags if name in attrs]


# --------------------------------------------------------------------------- the page


def test_every_kit_with_what_it_needs_and_how_to_fetch_it() -> None:
    index = three_kits()
    text = page_text(index)
    for kit in index["kits"]:
        assert f"<code>{kit['tag']}</code>" in text
        assert f"ninfer-kits verify {kit['tag']}/" in text
        for flavour in kit["flavours"]:
            assert f'<a href="{flavour["urls"]["github"]}">{flavour["asset"]}</a>' in text
            assert f'title="{flavour["sha256"]}"' in text
    assert "GeForce RTX 4090" in text
    assert "CUDA 13.0.88, driver ≥ 580" in text
    assert "SASS sm_86; PTX compute_86" in text
    assert "glibc ≥ 2.38" in text and "glibc ≥ 2.28" in text
    assert "<li>debian-13</li>" in text and "not known: rhel-10" in text
    assert "326.4 MB" in text and "401.0 MB" in text
    assert "signed</span>, key <code" in text and "unsigned (no SHA256SUMS.sig)" in text
    assert "identical</span> (2026-12-05)" in text
    assert "not independently reproduced" in text
    assert "ninfer/ninfer</a> 0.6.1 at <code" in text and ">9899488d0123</code>" in text
    assert "2026-12-03 05:49 UTC" in text
    # newest published first
    assert text.index("v0.6.1-rtx3090") < text.index("v0.6.0-rtx4090") < text.index("v0.5.0")


def test_the_commands_are_the_clis() -> None:
    text = page_text(three_kits())
    tag = "v0.6.1-rtx3090-linux-sm86"
    pyz = f"{DOWNLOAD}/{tag}/ninfer-kits.pyz"
    for line in (f"ninfer-kits fetch {tag} --repository {OWNER}",
                 f"ninfer-kits fetch {tag} --portable --repository {OWNER}",
                 f"ninfer-kits verify {tag}/",
                 f"curl -fLO {pyz} -O {DOWNLOAD}/{tag}/SHA256SUMS",
                 "sha256sum -c --ignore-missing SHA256SUMS",
                 f"python3 ninfer-kits.pyz fetch {tag} --repository {OWNER}",
                 f"python3 ninfer-kits.pyz fetch {tag} --portable --repository {OWNER}",
                 f"python3 ninfer-kits.pyz verify {tag}/"):
        assert f"\n{line}\n" in text or f"\n{line}</code>" in text, line
    # the kit without a GitHub store and without a pyz: the matrix's repository, no curl line
    assert "\nninfer-kits fetch v0.5.0-rtx3090-linux-sm86\n" in text
    assert "ninfer-kits.pyz fetch v0.5.0" not in text


def test_a_kit_published_before_needs_were_recorded() -> None:
    kit = make_kit("v0.5.0-old-sm86", card="RTX 3090", published="2026-01-01T00:00:00Z",
                   recorded=False)
    kit["assets"][1]["urls"] = {}  # BUILDINFO.txt on no store: named, not linked
    text = page_text(make_index(kit))
    assert "<dd>BUILDINFO.txt · <a href=" in text
    assert "not judged (published before it was recorded)" in text
    assert "not recorded (published before it was)" in text


def test_nothing_of_the_index_runs_or_loads() -> None:
    kit = make_kit("v1-hostile", card=HOSTILE, published="2026-12-01T00:00:00Z")
    kit["tag"] = f"v1{HOSTILE}"
    kit["flavours"][0]["urls"] = {"github": "javascript:alert(3)", "b2": "https://ok.invalid/"}
    kit["assets"][1]["urls"] = {"github": " JavaScript:alert(4)"}  # BUILDINFO.txt
    kit["assets"][2]["urls"] = {"github": "javascript:alert(7)"}  # ninfer-kits.pyz
    kit["stores"]["github"]["location"] = "data:text/html,<script>alert(5)</script>"
    kit["upstream_url"] = "vbscript:msgbox(6)"
    text = page_text(make_index(kit))
    assert HOSTILE not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img" in text
    assert "<script" not in text.lower()
    assert "javascript:alert(3)" in text and "JavaScript:alert(4)" in text  # shown, as text
    # quoted for the shell, then for HTML: a pasted command runs nothing of the index's
    assert "curl -fLO &#x27;javascript:alert(7)&#x27;" in text
    assert f"ninfer-kits fetch {html.escape(shlex.quote(kit['tag']))} --repository" in text
    elements = Elements(text)
    assert not elements.problems
    assert all(href.startswith(("https://", "http://", "file://", "#", "index.json"))
               for href in elements.attributes("href")), elements.attributes("href")
    assert not [attrs for _, attrs in elements.tags if any(a.startswith("on") for a in attrs)]
    assert not elements.attributes("src")
    assert len(elements.attributes("id")) == len(set(elements.attributes("id")))


def test_a_page_without_script_or_anything_fetched() -> None:
    text = page_text(three_kits())
    elements = Elements(text)
    assert not elements.problems and not elements.open
    assert "<script" not in text.lower()
    assert {tag for tag, _ in elements.tags}.isdisjoint(
        {"script", "img", "link", "iframe", "object", "embed", "svg", "form"})
    assert not elements.attributes("src") and "url(" not in text and "@import" not in text
    assert '<meta charset="utf-8">' in text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert "default-src 'none'" in text
    assert '<a href="index.json">index.json</a>' in text


def test_the_same_index_gives_the_same_bytes() -> None:
    assert render_page(three_kits()) == render_page(three_kits())
    assert render_page(three_kits()) != render_page(make_index(*three_kits()["kits"][:2]))


def test_no_kits_yet() -> None:
    text = page_text(make_index())
    assert "No kits published yet." in text
    assert "<table" not in text and not Elements(text).problems


def test_write_makes_both_files(tmp_path: Path) -> None:
    index = three_kits()
    json_path, html_path = kitindex.write(tmp_path, index)
    assert (json_path.name, html_path.name) == (kitindex.JSON_NAME, kitindex.HTML_NAME)
    assert json.loads(json_path.read_bytes()) == index
    assert html_path.read_bytes() == render_page(index)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index.html", "index.json"]


# --------------------------------------------------------------------------- a real browser


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if found:
        return found
    message = ("Chromium is not installed: the browser tests of the kit index page need it. "
               "Install it as root with `python -m ninfer_kits.pipeline.hostdeps --tests` "
               "(on Debian: apt-get install -y chromium), or set CHROMIUM to its "
               f"path; {SKIP_BROWSER}=1 skips these tests")
    if os.environ.get(SKIP_BROWSER):
        pytest.skip(f"{message} ({SKIP_BROWSER} is set)")
    pytest.fail(message, pytrace=False)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Chromium and a folder of the test's own for its home and profiles."""
    folder = tmp_path / "browser"
    folder.mkdir()
    yield chromium(), folder


def run_chromium(browser: tuple[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with a fresh profile, everything it writes under the test's folder;
    killed with its helpers (its process group) when it runs past BROWSER_TIMEOUT."""
    program, folder = browser
    home = folder / "home"
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
               "LANG": "C.UTF-8", "TZ": "UTC"}
    profile = tempfile.mkdtemp(prefix="profile-", dir=folder)
    command = [program, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environ,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"chromium ran past {BROWSER_TIMEOUT:.0f} s ({' '.join(args)}); killed:\n"
                    f"{stderr[-3000:]}", pytrace=False)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def load(browser: tuple[str, Path], page: Path) -> tuple[str, list[str]]:
    """The DOM after `page` has loaded, and the console messages it caused."""
    done = run_chromium(browser, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, [line for line in done.stderr.splitlines() if CONSOLE.search(line)]


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG) and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def png_pixels(data: bytes) -> bytes:
    """The PNG's image data, inflated (its filter bytes among the pixels)."""
    chunks, offset = [], len(PNG)
    while offset < len(data):
        length = int.from_bytes(data[offset:offset + 4], "big")
        if data[offset + 4:offset + 8] == b"IDAT":
            chunks.append(data[offset + 8:offset + 8 + length])
        offset += length + 12
    return zlib.decompress(b"".join(chunks))


def test_the_console_detector_sees_a_broken_page(browser: tuple[str, Path]) -> None:
    """The detector below is worth something only if it sees these: a script that throws, and
    what the page's Content-Security-Policy refuses (an image, a script), as the real page
    would report anything it tried to run or load."""
    folder = browser[1]
    throws = folder / "throws.html"
    throws.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head>'
                      '<body><p>x</p><script>throw new Error("boom-from-the-page")</script>'
                      "</body></html>", encoding="utf-8")
    _, messages = load(browser, throws)
    assert any("Uncaught Error: boom-from-the-page" in line for line in messages), messages
    refused = folder / "refused.html"
    head = render_page(make_index()).decode().partition("<main>")[0]
    refused.write_text(f'{head}<main><img src="missing.png"></main></body></html>',
                       encoding="utf-8")
    _, messages = load(browser, refused)
    assert any("missing.png" in line and "Content Security Policy" in line
               for line in messages), messages


def test_chromium_loads_the_page(browser: tuple[str, Path]) -> None:
    index = three_kits()
    page = browser[1] / "index.html"
    page.write_bytes(render_page(index))
    dom, messages = load(browser, page)
    assert messages == []
    assert "<main>" in dom and "NInfer kits" in dom
    for kit in index["kits"]:
        assert f"<code>{kit['tag']}</code>" in dom, kit["tag"]
    shot = browser[1] / "page.png"
    done = run_chromium(browser, f"--screenshot={shot}", "--window-size=1280,1000",
                        "--hide-scrollbars", page.as_uri())
    assert done.returncode == 0, done.stderr[-3000:]
    data = shot.read_bytes()
    assert png_size(data) == (1280, 1000)
    assert len(set(png_pixels(data))) > 16  # text and lines, not a blank page


def test_chromium_shows_the_empty_index(browser: tuple[str, Path]) -> None:
    page = browser[1] / "index.html"
    page.write_bytes(render_page(make_index()))
    dom, messages = load(browser, page)
    assert messages == [] and "No kits published yet." in dom
