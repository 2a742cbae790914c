"""Release notes, rendered from the kit's BUILDINFO.txt (what docs/publish.md's `plan` stage
says they hold)."""

from __future__ import annotations

import re

from ninfer_kits.kit import flavours
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.release.reproduction import NAME as REPRODUCTION
from ninfer_kits.release.reproduction import Reproduction
from ninfer_kits.release.signatures import NAMESPACE as SIGNATURE_NAMESPACE

_FORGE_URL = re.compile(r"https://(?:github\.com|gitlab\.com|codeberg\.org)/[^/\s]+/[^/\s]+")


def title(info: BuildInfo, tag: str) -> str:
    """The release's name: `ninfer-3090 0.6.1-rtx3090 for RTX 3090 (sm_86)`."""
    what = info.version or info.revision[:12]
    name = info.upstream.rsplit("/", 1)[-1]
    return f"{name} {what} for {info.card} ({info.arch}) — {tag}"


def revision_url(info: BuildInfo) -> str:
    """The upstream revision's page: the forge it was fetched from, else the matrix's GitHub."""
    url = info.upstream_url.removesuffix("/").removesuffix(".git")
    base = url if _FORGE_URL.fullmatch(url) else f"https://github.com/{info.upstream}"
    return f"{base}/commit/{info.revision}"


def repository_url(info: BuildInfo) -> str:
    return revision_url(info).rsplit("/commit/", 1)[0]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _pyz_lines(base: str, tag: str, fetch_hint: str | None) -> list[str]:
    if fetch_hint is None:
        return []
    return ["Nothing to install but `python3` (≥ 3.11): `ninfer-kits.pyz` fetches the kit, "
            "checks every hash, unpacks it and checks this machine in one go. `SHA256SUMS` "
            "lists it too: check it (and, above, the signature of `SHA256SUMS`) before it "
            "runs:", "",
            "```sh", f"curl -fLO {base}/ninfer-kits.pyz && curl -fLO {base}/SHA256SUMS && "
            f"sha256sum -c --ignore-missing SHA256SUMS && python3 ninfer-kits.pyz fetch {tag}"
            f"{fetch_hint}", "```", ""]


def _flavour_lines(base: str, flavour: str, tarball: str) -> list[str]:
    """What another flavour's tarball is, and its download-and-check one-liner."""
    kind = flavours.named(flavour)
    purpose = kind.purpose if kind is not None else f"the {flavour} flavour of the same build"
    return [f"`{tarball}` is {purpose}:", "",
            "```sh", f"curl -fLO {base}/{tarball} && curl -fLO {base}/SHA256SUMS && "
            f"sha256sum -c --ignore-missing SHA256SUMS && tar xzf {tarball}", "```", ""]


def _signature_lines(base: str, signed: tuple[str, str] | None) -> list[str]:
    """How to check SHA256SUMS.sig by hand (`signed`: identity and key fingerprint)."""
    if signed is None:
        return []
    identity, fingerprint = signed
    return [f"`SHA256SUMS` is signed: `SHA256SUMS.sig` is an OpenSSH signature by `{identity}` "
            f"(key `{fingerprint}`). With the project's `allowed_signers` file (beside "
            f"`matrix.toml` in its repository), check it before `sha256sum -c`:", "",
            "```sh", f"curl -fLO {base}/SHA256SUMS.sig",
            f"ssh-keygen -Y verify -f allowed_signers -I {identity} -n {SIGNATURE_NAMESPACE} "
            f"-s SHA256SUMS.sig < SHA256SUMS", "```", ""]


def _reproduction_lines(reproduced: Reproduction | None) -> list[str]:
    """What the independent rebuild found (`reproduced`), or that there was none."""
    if reproduced is None:
        return ["## Reproduced?", "", "Not independently reproduced: no second build was "
                "compared with this kit before it was published.", ""]
    lines = ["## Reproduced?", "", f"{reproduced.words()[0].upper()}{reproduced.words()[1:]}. "
             f"`{REPRODUCTION}` (listed in `SHA256SUMS`) is the record; "
             f"`ninfer-kits verify` shows it.", ""]
    if reproduced.differences:
        lines[-1:-1] = ["", *(f"- {_cell(line)}" for line in reproduced.differences)]
    return lines


def _forbidden_lines(forbidden: tuple[str, ...]) -> list[str]:
    """First, where the licence policy forbids the kit: it must not be distributed."""
    if not forbidden:
        return []
    return ["## This release must not be distributed", "",
            "The licence policy of ninfer-kits forbids distributing its components together "
            "(docs/publish.md, the licence gate); it was published to a folder only.", "",
            *(f"- {_cell(line)}" for line in forbidden), ""]


def render(info: BuildInfo, *, tag: str, asset: str, download_base: str,
           fetch_hint: str | None = None, tarballs: tuple[tuple[str, str], ...] = (),
           signed: tuple[str, str] | None = None,
           reproduced: Reproduction | None = None, forbidden: tuple[str, ...] = ()) -> str:
    """The Markdown body of the release. `download_base`: the assets' folder URL; `tarballs`:
    (flavour, tarball) of each other flavour; `signed`: identity and key fingerprint;
    `reproduced`: its REPRODUCTION.json."""
    base = download_base.rstrip("/")
    version = f" {info.version}" if info.version else ""
    floor = "\n".join(f"| {_cell(requirement)} | {_cell(why)} |"
                      for requirement, why in info.floor) or "| (no floor recorded) | |"
    licenses = ", ".join(f"`{path}`" for path in info.licenses) or "(none recorded)"
    # SHA256SUMS lists every file of the release: the check skips those not downloaded
    check = "sha256sum -c --ignore-missing SHA256SUMS"
    lines = [
        *_forbidden_lines(forbidden),
        f"Prebuilt Linux kit of [{info.upstream}]({repository_url(info)}){version} for the "
        f"**{info.card}** (CUDA arch `{info.arch}`), built from revision "
        f"[`{info.revision[:12]}`]({revision_url(info)}) with CUDA {info.cuda_version}.",
        "",
        "## Download and verify",
        "",
        "```sh",
        "# the kit, its checksums and its build record",
        f"curl -fLO {base}/{asset}",
        f"curl -fLO {base}/SHA256SUMS",
        f"curl -fLO {base}/BUILDINFO.txt",
        "# every line must say OK",
        check,
        "# unpack kit/, then check that this machine can run it (pip install ninfer-kits)",
        f"tar xzf {asset}",
        f"ninfer-kits verify {asset}",
        "```",
        "",
        "`SHA1SUMS` holds the tarball's SHA-1 for clients that check only that "
        "(`sha1sum -c SHA1SUMS`).",
        "",
        *_signature_lines(base, signed),
        *(line for flavour, tarball in tarballs for line in _flavour_lines(base, flavour, tarball)),
        *_pyz_lines(base, tag, fetch_hint),
        *_reproduction_lines(reproduced),
        "## What a machine needs to run it",
        "",
        "| Requirement | Why |",
        "|---|---|",
        floor,
        "",
        "## How it was built",
        "",
        f"- upstream: [{info.upstream}]({repository_url(info)}), branch `{info.tracked_ref}`, "
        f"revision [`{info.revision}`]({revision_url(info)})"
        + (f", version `{info.version}`" if info.version else ""),
        f"- toolchain: `{info.toolchain}` ({info.builder} builder), CUDA {info.cuda_version}, "
        f"{info.host_compiler}",
        f"- ninfer-kits {info.pipeline_version} at `{info.pipeline_commit}`; every detail is "
        f"in `BUILDINFO.txt`",
        "",
        "## License",
        "",
        f"The binaries in this kit are built, unmodified, from [{info.upstream}]"
        f"({repository_url(info)}) at revision `{info.revision[:12]}` and are redistributed "
        f"under the upstream's license. The kit carries the upstream's license and notice "
        f"files: {licenses}. ninfer-kits, which built it, is MIT-licensed.",
        "",
    ]
    return "\n".join(lines)
