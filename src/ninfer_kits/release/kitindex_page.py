"""index.html: the kit index as a standalone page for people (docs/index.md); why it is shaped
so (no script, a CSP, escaping): DEVELOPING.md, "Release formats". It takes the index as data
and never imports kitindex, which imports it."""

from __future__ import annotations

import html
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ninfer_kits.kit import flavours

JSON_NAME = "index.json"  # kitindex.JSON_NAME, the file beside this page
PYZ_NAME = "ninfer-kits.pyz"  # the zipapp each release carries (docs/fetch.md)
SUMS_NAME = "SHA256SUMS"  # which lists every file of a release but its signature
LINKABLE = ("https://", "http://", "file://")
HASH_SHOWN = 12  # characters of a sha256 shown at each end; the rest behind a click
_ANCHOR = re.compile(r"[A-Za-z][A-Za-z0-9._-]*")
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}Z")

CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;
--box:#f6f8fa;--link:#0550ae;--ok:#1a7f37;--bad:#cf222e}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--line:#3d444d;--box:#151b23;--link:#4493f8;--ok:#3fb950;--bad:#f85149}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif}
main{max-width:76rem;margin:0 auto;padding:1rem}
h1{margin:.5rem 0}h2{margin:0 0 .25rem;font-size:1.25rem}h3{margin:0 0 .5rem;font-size:1rem}
h2 code{font-size:1em;overflow-wrap:anywhere}
a{color:var(--link)}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.875em}
pre{background:var(--box);border:1px solid var(--line);border-radius:6px;padding:.6rem .75rem;
margin:.25rem 0 .75rem;overflow-x:auto}
pre code{font-size:1em}
.intro{max-width:48rem}
.muted{color:var(--muted)}.ok{color:var(--ok)}.bad{color:var(--bad)}
.scroll{overflow-x:auto;margin:1rem 0}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.4rem .6rem;border-bottom:1px solid var(--line)}
th{font-size:.85rem;color:var(--muted);font-weight:600}
.summary{font-size:.9rem}.summary td{white-space:nowrap}
.summary td.card{white-space:normal;min-width:9rem}
article{border:1px solid var(--line);border-radius:8px;padding:1rem;margin:1.25rem 0}
article>p{margin:0 0 .75rem}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2rem 1rem;margin:0 0 1rem}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
.flavours{display:grid;gap:1rem;margin-bottom:1rem;
grid-template-columns:repeat(auto-fit,minmax(min(100%,26rem),1fr))}
.flavour{border:1px solid var(--line);border-radius:6px;padding:.75rem;min-width:0}
.flavour dl{margin:0}
ul.ids{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.25rem}
ul.ids li{border:1px solid var(--line);border-radius:1rem;padding:0 .5rem;font-size:.85em}
details summary{cursor:pointer}
.note{display:block;color:var(--muted);font-size:.85em}
.wrap{overflow-wrap:anywhere;word-break:break-all}
@media (max-width:40rem){main{padding:.75rem}dl{grid-template-columns:minmax(0,1fr)}
dt{margin-top:.4rem}article{padding:.75rem}}
"""

HEAD = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="referrer" content="no-referrer">
<title>NInfer kits</title>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>NInfer kits</h1>
"""
FOOT = "</main>\n</body>\n</html>\n"


def render_page(index: Mapping[str, Any]) -> bytes:
    """index.html's bytes for `index`: the same bytes for the same index."""
    kits: Sequence[Mapping[str, Any]] = index.get("kits") or ()
    # oldest first in the index; a reader comes for the newest
    newest_first = list(reversed(kits))
    anchors = _anchors(newest_first)
    parts = [HEAD, _intro(len(kits))]
    if not kits:
        parts.append('<p class="empty"><strong>No kits published yet.</strong></p>\n')
    else:
        parts.append(_summary(newest_first, anchors))
        parts += [_kit(kit, anchor) for kit, anchor in zip(newest_first, anchors, strict=True)]
    parts.append(FOOT)
    return "".join(parts).encode("utf-8")


def _e(value: object) -> str:
    """A value as HTML text (quotes too: it may land in an attribute)."""
    return html.escape("" if value is None else str(value))


def _linkable(url: object) -> bool:
    return isinstance(url, str) and url.lower().startswith(LINKABLE)


def _link(url: object, label: str | None = None) -> str:
    """`label` (HTML) linking to `url` when its scheme is safe; else the label alone."""
    if url is None:
        return label or ""
    if _linkable(url):
        return f'<a href="{_e(url)}">{label if label is not None else _e(url)}</a>'
    shown = f'<code class="wrap">{_e(url)}</code>'
    return shown if label is None else f"{label} ({shown})"


def _first_url(urls: object) -> str | None:
    """The URL on the first store the asset was published to."""
    if isinstance(urls, Mapping):
        return next((str(url) for url in urls.values()), None)
    return None


def _megabytes(size: object) -> str:
    if not isinstance(size, int):
        return "size not known"
    if size >= 100_000:
        return f"{size / 1e6:,.1f} MB"
    return f"{size:,} bytes"


def _when(stamp: object) -> str:
    match = _TIMESTAMP.fullmatch(str(stamp))
    return f"{match.group(1)} {match.group(2)} UTC" if match else str(stamp)


def _sha256(digest: object) -> str:
    """The hash shortened, whole a click away (a phone has no hover)."""
    full = str(digest)
    if len(full) <= 2 * HASH_SHOWN:
        return f'<code class="wrap">{_e(full)}</code>'
    short = f"{full[:HASH_SHOWN]}…{full[-HASH_SHOWN:]}"
    return (f'<details><summary><code title="{_e(full)}">{_e(short)}</code></summary>'
            f'<code class="wrap">{_e(full)}</code></details>')


def _ids(names: Iterable[object]) -> str:
    return '<ul class="ids">' + "".join(f"<li>{_e(name)}</li>" for name in names) + "</ul>"


def _anchors(kits: Sequence[Mapping[str, Any]]) -> list[str]:
    """An id per kit: its tag where a plain word used once (links last), else its place."""
    tags = [str(kit.get("tag", "")) for kit in kits]
    return [tag if _ANCHOR.fullmatch(tag) and tags.count(tag) == 1 else f"kit-{number}"
            for number, tag in enumerate(tags, 1)]


def _cuda(kit: Mapping[str, Any]) -> str:
    driver = kit.get("driver_minimum")
    shown = f"driver ≥ {_e(driver)}" if driver else "driver minimum not known"
    return f"CUDA {_e(kit.get('cuda_version'))}, {shown}"


def _gpu_code(needs: Mapping[str, Any] | None) -> str:
    if needs is None:
        return '<span class="muted">not recorded (published before it was)</span>'
    parts = [f"{label} {', '.join(_e(arch) for arch in needs.get(key) or ())}"
             for label, key in (("SASS", "sass"), ("PTX", "ptx"),
                                ("relocatable SASS", "relocatable_sass"),
                                ("relocatable PTX", "relocatable_ptx"))
             if needs.get(key)]
    return "; ".join(parts) or '<span class="muted">no GPU code found</span>'


def _glibc(needs: Mapping[str, Any] | None, *, short: bool = False) -> str:
    if needs is None:
        return '<span class="muted">not recorded</span>'
    if needs.get("glibc") is None:
        return "any" if short else "any (it references no GLIBC_ version)"
    return f"{'' if short else 'glibc '}≥ {_e(needs['glibc'])}"


def _distributions(judged: Mapping[str, Any] | None) -> str:
    if judged is None:
        return '<span class="muted">not judged (published before it was recorded)</span>'
    meets = judged.get("meets") or ()
    shown = _ids(meets) if meets else '<span class="bad">none of those judged</span>'
    unknown = judged.get("not_known") or ()
    if unknown:
        shown += f'<span class="note">not known: {", ".join(_e(u) for u in unknown)}</span>'
    return shown + f'<span class="note">judged on the facts of {_e(judged.get("as_of"))}</span>'


def _signed(kit: Mapping[str, Any]) -> str:
    key = kit.get("signed_by")
    if not key:
        return '<span class="muted">unsigned (no SHA256SUMS.sig)</span>'
    return f'<span class="ok">signed</span>, key <code class="wrap">{_e(key)}</code>'


def _reproduction(kit: Mapping[str, Any], *, short: bool = False) -> str:
    record = kit.get("reproduction")
    if not record:
        return f'<span class="muted">not {"" if short else "independently "}reproduced</span>'
    result = str(record.get("result"))
    tone = "ok" if result == "identical" else "bad"
    shown = f'<span class="{tone}">{_e(result)}</span> ({_e(record.get("date"))})'
    if short:
        return shown
    run = record.get("run")
    if record.get("summary"):
        shown += f": {_e(record['summary'])}"
    return shown + (f" · {_link(run, 'the run')}" if run else "")


def _upstream(kit: Mapping[str, Any]) -> str:
    name = _e(kit.get("upstream"))
    url = kit.get("upstream_url")
    shown = f'<a href="{_e(url)}">{name}</a>' if _linkable(url) else name
    if kit.get("version"):
        shown += f" {_e(kit['version'])}"
    revision = str(kit.get("revision", ""))
    return shown + f' at <code title="{_e(revision)}">{_e(revision[:12])}</code>'


def _stores(kit: Mapping[str, Any]) -> str:
    stores: Mapping[str, Any] = kit.get("stores") or {}
    # a location that is no web address (b2://bucket/…) is said by the store's name alone
    return ", ".join(_link(store.get("location"), _e(name)) if _linkable(store.get("location"))
                     else _e(name) for name, store in stores.items())


def _repository(kit: Mapping[str, Any]) -> str | None:
    github = (kit.get("stores") or {}).get("github") or {}
    repository = github.get("repository")
    return str(repository) if repository else None


def _intro(count: int) -> str:
    listed = {0: "", 1: " One kit."}.get(count, f" {count} kits, newest first.")
    return (f'<p class="intro">Prebuilt kits of NInfer, a CUDA LLM engine, each built for one '
            f"GPU arch: what each needs to run, where to download it, and how to fetch and verify "
            f'it.{listed} <a href="{JSON_NAME}">{JSON_NAME}</a> beside this page is the same '
            f"data for programs.</p>\n")


def _summary(kits: Sequence[Mapping[str, Any]], anchors: Sequence[str]) -> str:
    head = "".join(f"<th>{name}</th>" for name in (
        "Kit", "Card", "Arch", "CUDA", "glibc", "Published", "Signed", "Reproduced"))
    rows = "".join(_summary_row(kit, anchor) for kit, anchor in zip(kits, anchors, strict=True))
    return (f'<div class="scroll"><table class="summary">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{rows}</tbody>\n</table></div>\n")


def _summary_row(kit: Mapping[str, Any], anchor: str) -> str:
    flavours: Sequence[Mapping[str, Any]] = kit.get("flavours") or ()
    glibc = "<br>".join(f"{_e(flavour.get('flavour'))} {_glibc(flavour.get('needs'), short=True)}"
                        for flavour in flavours)
    driver = kit.get("driver_minimum")
    cuda = _e(kit.get("cuda_version")) + (f" (driver ≥ {_e(driver)})" if driver else "")
    cells = (f'<td><a href="#{_e(anchor)}"><code>{_e(kit.get("tag"))}</code></a></td>',
             # the one cell free to wrap
             f'<td class="card">{_e(kit.get("card"))}</td>',
             *(f"<td>{cell}</td>" for cell in (
                 _e(kit.get("arch")), cuda, glibc, _e(str(kit.get("published_at", ""))[:10]),
                 '<span class="ok">signed</span>' if kit.get("signed_by") else "unsigned",
                 _reproduction(kit, short=True))))
    return "<tr>" + "".join(cells) + "</tr>\n"


def _kit(kit: Mapping[str, Any], anchor: str) -> str:
    facts = (("Built for", f"{_e(kit.get('arch'))} · {_cuda(kit)}"),
             ("Upstream", _upstream(kit)),
             ("Published", f"{_e(_when(kit.get('published_at')))} on {_stores(kit)}"),
             ("Signed", _signed(kit)),
             ("Reproduced", _reproduction(kit)),
             ("Other files", _other_files(kit)))
    flavours: Sequence[Mapping[str, Any]] = kit.get("flavours") or ()
    return (f'<article id="{_e(anchor)}">\n<h2><code>{_e(kit.get("tag"))}</code></h2>\n'
            f"<p>{_e(kit.get('card'))}</p>\n{_dl(facts)}"
            f'<div class="flavours">\n{"".join(_flavour(flavour) for flavour in flavours)}</div>\n'
            f"{_commands(kit)}{_floor(kit)}</article>\n")


def _dl(facts: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, HTML) pairs; an empty value is left out."""
    return "<dl>\n" + "".join(f"<dt>{label}</dt><dd>{value}</dd>\n"
                              for label, value in facts if value) + "</dl>\n"


def _flavour(flavour: Mapping[str, Any]) -> str:
    needs = flavour.get("needs")
    url = _first_url(flavour.get("urls"))
    tarball = _link(url, _e(flavour.get("asset")))
    facts = (("What", _purpose(str(flavour.get("flavour")))),
             ("Tarball", f"{tarball} ({_megabytes(flavour.get('size'))})"),
             ("sha256", _sha256(flavour.get("sha256"))),
             ("GPU code", _gpu_code(needs)),
             ("C library", _glibc(needs)),
             ("System libraries", ", ".join(_e(name) for name in needs.get("sonames") or ())
              if needs else ""),
             ("Runs on", _distributions(flavour.get("distributions"))))
    return (f'<section class="flavour">\n<h3>{_e(flavour.get("flavour"))}</h3>\n'
            f"{_dl(facts)}</section>\n")


def _purpose(flavour: str) -> str:
    """What a flavour is, in the release notes' words; nothing for plain or unknown ones."""
    kind = flavours.named(flavour)
    return "" if kind is None else re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(kind.purpose))


def _other_files(kit: Mapping[str, Any]) -> str:
    tarballs = {flavour.get("asset") for flavour in kit.get("flavours") or ()}
    return " · ".join(_link(_first_url(asset.get("urls")), _e(asset.get("name")))
                      for asset in kit.get("assets") or () if asset.get("name") not in tarballs)


def _commands(kit: Mapping[str, Any]) -> str:
    """fetch and verify as docs/fetch.md has them: installed, and with the release's .pyz."""
    tag = str(kit.get("tag", ""))
    repository = _repository(kit)
    source = ("--repository", repository) if repository else ()
    names = [str(flavour.get("flavour")) for flavour in kit.get("flavours") or ()]
    options = [(name, option) for name in names if (option := _fetch_option(name)) is not None]
    if not options:
        return ""
    blocks = ["<h3>Fetch and verify</h3>\n<p>With ninfer-kits installed (fetch checks "
              "SHA256SUMS, and its signature where there is one, unpacks the kit into "
              f"<code>./{_e(tag)}/kit</code> and verifies it on this machine; verify checks "
              "again later):</p>\n"]
    blocks += [_pre(f"the {name} tarball", ("ninfer-kits", "fetch", tag, *flag, *source),
                    ("ninfer-kits", "verify", f"{tag}/")) for name, flag in options]
    return "".join(blocks) + _pyz_commands(kit, options, source)


def _fetch_option(flavour: str) -> tuple[str, ...] | None:
    """fetch's option for `flavour`; None for one this ninfer-kits does not know."""
    if flavour == flavours.PLAIN:
        return ()
    kind = flavours.named(flavour)
    return kind.fetch_option if kind is not None else None


def _pyz_commands(kit: Mapping[str, Any], options: Sequence[tuple[str, tuple[str, ...]]],
                  source: Sequence[str]) -> str:
    """The same with the release's .pyz, each block whole (none without a .pyz)."""
    tag = str(kit.get("tag", ""))
    pyz = next((asset for asset in kit.get("assets") or () if asset.get("name") == PYZ_NAME),
               None)
    url = _first_url(pyz.get("urls")) if pyz else None
    sums = next((asset for asset in kit.get("assets") or () if asset.get("name") == SUMS_NAME),
                None)
    sums_url = _first_url(sums.get("urls")) if sums else None
    if not url or not sums_url:  # nothing to check the pyz against: no command to run it
        return ""
    # the .pyz runs fetch's checks, so it is checked first, by hand
    return (f"<p>Without it, with nothing but python3 ≥ 3.11: the release's {PYZ_NAME}, "
            f"checked against the release's {SUMS_NAME} before it runs (README.md shows how to "
            f"check that file's signature)</p>\n"
            + "".join(_pre(f"the {name} tarball", ("curl", "-fLO", url, "-O", sums_url),
                           ("sha256sum", "-c", "--ignore-missing", SUMS_NAME),
                           ("python3", PYZ_NAME, "fetch", tag, *flag, *source),
                           ("python3", PYZ_NAME, "verify", f"{tag}/"))
                      for name, flag in options))


def _pre(comment: str, *commands: Sequence[str]) -> str:
    """Shell lines to paste: each word quoted for the shell, then for HTML."""
    text = "\n".join([f"# {comment}", *(shlex.join(command) for command in commands)])
    return f"<pre><code>{_e(text)}</code></pre>\n"


def _floor(kit: Mapping[str, Any]) -> str:
    floor: Sequence[Mapping[str, Any]] = kit.get("floor") or ()
    if not floor:
        return ""
    rows = "".join(f"<tr><td>{_e(row.get('requirement'))}</td><td>{_e(row.get('why'))}</td></tr>\n"
                   for row in floor)
    return (f"<details><summary>What the plain kit needs to run (its floor, as BUILDINFO.txt "
            f'has it)</summary>\n<div class="scroll"><table>\n<thead><tr><th>Requirement</th>'
            f"<th>Why</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table></div></details>\n")
