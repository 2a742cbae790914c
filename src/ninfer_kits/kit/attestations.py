"""A kit tarball's CycloneDX 1.6 SBOM and in-toto SLSA v1 provenance, pure functions of the kit
folder so that the same inputs give the same bytes (docs/attestations.md says what they hold)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ninfer_kits.errors import BadInput
from ninfer_kits.kit import kitdir, licence_policy, spdx
from ninfer_kits.kit.buildinfo import BUNDLED_ORIGIN, BuildInfo
from ninfer_kits.oci.reference import parse_pin

CDX_SPEC = "1.6"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PROJECT = "https://github.com/ninfer-kits/ninfer-kits"
# SLSA asks for a URI that documents the build type's parameters.
BUILD_TYPE = f"{PROJECT}/blob/main/docs/attestations.md#build-type-v1"
# A local or docker build is no workflow run: the builder is named by the kind of build.
BUILDER_ID = "urn:ninfer-kits:builder:{builder}"
KIT_REF = "kit"
# every toolchain image of the matrix is Debian's
DEB_VENDOR = "debian"
DEB_ARCH = "amd64"
REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
HEX = re.compile(r"[0-9a-f]+")
IMAGE_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
THIRD_PARTY = "kit/third_party/"
COMPILED_IN = "third_party/compiled-in.json"  # in kit/: the packages compiled into bin/
# a portable kit's bundled libraries' source packages and licence verdicts (data/copyleft.toml)
BUNDLED_LICENCES = "third_party/licences.json"
PROGRAM_PREFIX = "kit/bin/"


@dataclass(frozen=True, kw_only=True)
class CompiledIn:
    """A package whose source reached the binaries from outside the upstream's tree."""

    package: str
    version: str
    licence: str  # an SPDX expression where known, else the package's own words
    files: tuple[str, ...]  # the source files of it that the line tables name
    manager: str  # "dpkg" or "wheel": where the package comes from (its purl)
    terms: tuple[str, ...] = ()  # its licence texts in the tarball (kit/third_party/...)


@dataclass(frozen=True, kw_only=True)
class BundledLicence:
    """A bundled library's licence: the verdict on its (dpkg: source) package."""

    soname: str
    package: str  # the source package, wheel or built library that data/copyleft.toml judges
    licence: str  # an SPDX expression
    name: str = ""  # the licence in words, for a LicenseRef-…


@dataclass(frozen=True, kw_only=True)
class Subject:

    asset: str
    sha256: str

    @property
    def stem(self) -> str:
        return self.asset.removesuffix(kitdir.TARBALL_SUFFIX)


def documents(subject: Subject, info: BuildInfo, licence_texts: Mapping[str, bytes],
              compiled_in: tuple[CompiledIn, ...] = ()) -> dict[str, bytes]:
    """File name → bytes of the SBOM and the provenance of one tarball. `info`: the flavour's
    BUILDINFO.txt with the run keys; `licence_texts`: see `licence_texts`."""
    return {subject.stem + kitdir.SBOM_SUFFIX: _dump(sbom(subject, info, licence_texts,
                                                          compiled_in)),
            subject.stem + kitdir.PROVENANCE_SUFFIX: _dump(provenance(subject, info))}


def sbom(subject: Subject, info: BuildInfo, licence_texts: Mapping[str, bytes],
         compiled_in: tuple[CompiledIn, ...] = ()) -> dict[str, Any]:
    upstream = _upstream(info, licence_texts)
    claimed = {path for row in compiled_in for path in row.terms}
    listed = licence_texts.get(f"{kitdir.UNPACKED}/{BUNDLED_LICENCES}")
    licences = {} if listed is None else {row.soname: row for row in read_bundled_licences(
        listed, f"{subject.asset}:{kitdir.UNPACKED}/{BUNDLED_LICENCES}")}
    parts = [upstream, *_programs(info, upstream), *_vendored(info, licence_texts, claimed),
             *_bundled(info, licences), *(_compiled(row) for row in compiled_in)]
    images = _images(info)
    refs = [part["bom-ref"] for part in parts]
    if len(set(refs + [image["bom-ref"] for image in images])) != len(refs) + len(images):
        raise BadInput(f"{subject.asset}: two SBOM components share a bom-ref "
                       f"({', '.join(sorted(refs))})")
    kit = {"type": "application", "bom-ref": KIT_REF, "name": subject.stem,
           "version": info.version,
           "hashes": [_hash(subject.sha256)],
           "properties": _properties(flavour=info.flavour, kit=info.kit, arch=info.arch,
                                     sass=info.sass, ptx=info.ptx, glibc_floor=info.glibc_floor)}
    return {
        "bomFormat": "CycloneDX", "specVersion": CDX_SPEC, "version": 1,
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, _subject_uri(subject))}",
        "metadata": {"timestamp": _timestamp(info.source_date_epoch), "component": kit,
                     "tools": {"components": [{"type": "application", "name": "ninfer-kits",
                                               "version": info.pipeline_version}]}},
        "components": sorted([*parts, *images], key=lambda part: part["bom-ref"]),
        "dependencies": sorted([{"ref": KIT_REF, "dependsOn": sorted(refs)},
                                *({"ref": ref} for ref in refs)], key=lambda dep: dep["ref"]),
    }


def provenance(subject: Subject, info: BuildInfo) -> dict[str, Any]:
    upstream: dict[str, Any] = {"repository": info.upstream, "url": info.upstream_url,
                                "ref": info.tracked_ref, "revision": info.revision}
    dependencies: list[dict[str, Any]] = [
        {"uri": f"git+{info.upstream_url}@{info.tracked_ref}", "name": "upstream",
         "digest": {"gitCommit": info.revision}}]
    dependencies += [{"uri": f"oci://{image['name']}", "name": image["bom-ref"],
                      "digest": {"sha256": image["hashes"][0]["content"]}}
                     for image in _images(info)]
    dependencies += _pinned(info)
    commit = info.pipeline_commit
    # a dirty checkout has no commit that holds what ran
    dependencies.append({"uri": f"git+{PROJECT}", "name": "ninfer-kits",
                         **({"digest": {"gitCommit": commit}} if HEX.fullmatch(commit)
                            else {"annotations": {"revision": commit}})})
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject.asset, "digest": {"sha256": subject.sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"kit": info.kit, "arch": info.arch,
                                       "flavour": info.flavour, "upstream": upstream,
                                       "cmake_options": info.cmake_options,
                                       "toolchain": info.toolchain},
                "internalParameters": {"source_date_epoch": info.source_date_epoch,
                                       "recipe": info.recipe, "inputs": info.inputs,
                                       "builder": info.builder,
                                       "cuda_version": info.cuda_version,
                                       "host_compiler": info.host_compiler,
                                       "cmake_version": info.cmake_version,
                                       "python_version": info.python_version,
                                       "compressor": info.zlib_version},
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID.format(builder=info.builder),
                            "version": {"ninfer-kits": info.pipeline_version}},
                "byproducts": [{"name": path, "digest": {"sha256": digest}}
                               for digest, path in sorted(info.binaries, key=lambda b: b[1])],
            },
        },
    }


def _upstream(info: BuildInfo, texts: Mapping[str, bytes]) -> dict[str, Any]:
    own = [path for path in info.licenses if not path.startswith(THIRD_PARTY)]
    part: dict[str, Any] = {
        "type": "application", "bom-ref": "upstream", "name": info.upstream,
        "version": info.version,
        "licenses": [_licence_text(path, texts) for path in sorted(own)],
        "externalReferences": [{"type": "vcs", "url": info.upstream_url}],
        "properties": _properties(revision=info.revision, tracked_ref=info.tracked_ref)}
    if REPOSITORY.fullmatch(info.upstream):
        owner, name = info.upstream.split("/")
        part["purl"] = _purl("github", owner.lower(), name.lower(), info.revision)
    return part


def _programs(info: BuildInfo, upstream: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The kit's programs and the libraries it built itself, under the upstream's licence."""
    bundled = {f"kit/lib/{row[0]}" for row in info.bundled}
    ids = [entry["license"]["id"] for entry in upstream["licenses"] if "id" in entry["license"]]
    licences = _licence_entries(spdx.all_of(ids)) if ids else []
    return [{"type": "application" if path.startswith(PROGRAM_PREFIX) else "library",
             "bom-ref": path, "name": path.rsplit("/", 1)[-1], "version": info.version,
             "hashes": [_hash(digest)], **({"licenses": licences} if licences else {}),
             "properties": _properties(file=path, built_from="upstream")}
            for digest, path in sorted(info.binaries, key=lambda b: b[1]) if path not in bundled]


def _vendored(info: BuildInfo, texts: Mapping[str, bytes],
              claimed: set[str]) -> list[dict[str, Any]]:
    """A component per vendored third_party/ folder of licence files (no version)."""
    notices = {row[4] for row in info.bundled} | claimed  # (the compiled-in packages' terms)
    folders: dict[str, list[str]] = {}
    for path in info.licenses:
        if path.startswith(THIRD_PARTY) and path not in notices and "/" in \
                path.removeprefix(THIRD_PARTY):
            folders.setdefault(path.removeprefix(THIRD_PARTY).split("/")[0], []).append(path)
    return [{"type": "library", "bom-ref": f"third_party/{folder}", "name": folder,
             "version": info.revision,  # vendored at the upstream's revision
             "licenses": [_licence_text(path, texts) for path in sorted(paths)],
             "properties": _properties(vendored_by=info.upstream)}
            for folder, paths in sorted(folders.items())]


def _bundled(info: BuildInfo, licences: Mapping[str, BundledLicence]) -> list[dict[str, Any]]:
    """A component per kit/lib/ library: its licence the verdict on its source package, else
    the BUILDINFO line's (an expression, or Debian's words in a kit built before verdicts)."""
    parts = []
    for soname, digest, origin, licence, notice in info.bundled:
        match = BUNDLED_ORIGIN.fullmatch(origin)
        if match is None:
            raise BadInput(f"BUILDINFO.txt bundled line of {soname}: origin {origin!r} is not "
                           f"'<package> <version> (dpkg|wheel|built)'")
        package, version, manager = match["package"], match["version"], match["manager"]
        verdict = licences.get(soname)
        parts.append({"type": "library", "bom-ref": f"kit/lib/{soname}", "name": package,
                      "version": version, "purl": _package_purl(package, version, manager),
                      "hashes": [_hash(digest)],
                      "licenses": _bundled_licence(verdict, licence),
                      "properties": _properties(file=f"kit/lib/{soname}", notice=notice,
                                                **_licence_name(verdict))})
    return parts


def _bundled_licence(verdict: BundledLicence | None, words: str) -> list[dict[str, Any]]:
    if verdict is not None:
        return _licence_entries(verdict.licence)
    # Debian's copyright files name licences in their own words, not SPDX ids
    return _licence_entries(words) if spdx.is_expression(words) else \
        [{"license": {"name": words}}]


def _licence_name(verdict: BundledLicence | None) -> dict[str, str]:
    if verdict is None:
        return {}
    return {"licensed_as": verdict.package, **({"licence_name": verdict.name}
                                                if verdict.name else {})}


def _licence_entries(expression: str) -> list[dict[str, Any]]:
    """CycloneDX's `licenses`: `license.id` for one listed licence, else `expression` (a
    LicenseRef's words go to `ninfer-kits:licence_name`)."""
    parsed = spdx.parse(expression)
    if spdx.is_single_listed_id(parsed):
        return [{"license": {"id": parsed.render()}}]
    return [{"expression": parsed.render()}]


def _compiled(row: CompiledIn) -> dict[str, Any]:
    purl = _package_purl(row.package, row.version, row.manager)
    licences = _licence_entries(row.licence) if spdx.is_expression(row.licence) else \
        [{"license": {"name": row.licence}}]  # a distribution's words (its copyright file)
    return {"type": "library", "bom-ref": purl, "name": row.package, "version": row.version,
            "purl": purl, "scope": "required", "licenses": licences,
            "properties": [*({"name": "ninfer-kits:terms", "value": path}
                             for path in sorted(row.terms)),
                           *({"name": "ninfer-kits:compiled_in", "value": path}
                             for path in sorted(row.files))]}


def _pinned(info: BuildInfo) -> list[dict[str, Any]]:
    """The toolchain image's registry pin: what `repro --against` builds in."""
    try:
        pin = parse_pin(info.run_value("toolchain_image") or "")
    except ValueError:  # not pinned (built on the engine), or a kit from before pins
        return []
    return [{"uri": f"oci://{pin.repository}" + (f":{pin.tag}" if pin.tag else ""),
             "name": "toolchain_pin",
             "digest": {"sha256": pin.digest.removeprefix("sha256:")}}]


def _images(info: BuildInfo) -> list[dict[str, Any]]:
    """The base and toolchain images (scope `excluded`: they made the kit)."""
    images = []
    base = IMAGE_DIGEST.fullmatch(info.base_image_id)
    if base is not None:
        images.append(("base_image", info.base_image, base[1]))
    name, _, digest = (info.run_value("image") or "").partition("@")
    toolchain = IMAGE_DIGEST.fullmatch(digest)
    if toolchain is not None:
        images.append(("toolchain_image", name, toolchain[1]))
    return [{"type": "container", "bom-ref": ref, "name": name, "scope": "excluded",
             "hashes": [_hash(digest)]} for ref, name, digest in images]


def _texts_wanted(info: BuildInfo) -> set[str]:
    """All licence paths but the bundled libraries' Debian copyright files (named instead)."""
    notices = {row[4] for row in info.bundled} | {f"{THIRD_PARTY}README"}
    return {path for path in info.licenses if path not in notices}


def compiled_in_json(rows: Iterable[CompiledIn]) -> bytes:
    return _dump({"schema": 1, "packages": [
        {"package": row.package, "version": row.version, "manager": row.manager,
         "licence": row.licence, "terms": sorted(row.terms), "files": sorted(row.files)}
        for row in sorted(rows, key=lambda row: (row.package, row.version))]})


def bundled_licences_json(rows: Iterable[BundledLicence]) -> bytes:
    return _dump({"schema": 1, "libraries": [
        {"soname": row.soname, "package": row.package, "licence": row.licence,
         **({"name": row.name} if row.name else {})}
        for row in sorted(rows, key=lambda row: row.soname)]})


def read_bundled_licences(data: bytes, where: str) -> tuple[BundledLicence, ...]:
    """The rows of a licences.json; BadInput names the file and the fault."""
    try:
        document = json.loads(data)
        if document.get("schema") != 1:
            raise BadInput(f"{where}: schema {document.get('schema')!r}, this ninfer-kits "
                           "reads 1")
        rows = tuple(BundledLicence(soname=str(item["soname"]), package=str(item["package"]),
                                    licence=spdx.normalise(str(item["licence"])),
                                    name=str(item.get("name", "")))
                     for item in document["libraries"])
    except (ValueError, KeyError, TypeError, AttributeError, spdx.NotAnExpression) as error:
        raise BadInput(f"{where}: not a list of bundled libraries' licences ({error})") from None
    return rows


def read_compiled_in(data: bytes, where: str) -> tuple[CompiledIn, ...]:
    """The rows of a compiled-in.json; BadInput names the file and the fault."""
    try:
        document = json.loads(data)
        rows = tuple(CompiledIn(package=str(item["package"]), version=str(item["version"]),
                                licence=str(item["licence"]), manager=str(item["manager"]),
                                files=tuple(str(path) for path in item["files"]),
                                terms=tuple(str(path) for path in item["terms"]))
                     for item in document["packages"])
    except (ValueError, KeyError, TypeError) as error:
        raise BadInput(f"{where}: not a list of compiled-in packages ({error})") from None
    if document.get("schema") != 1:
        raise BadInput(f"{where}: schema {document.get('schema')!r}, this ninfer-kits reads 1")
    return rows


def licence_texts(info: BuildInfo, read: Callable[[str], bytes]) -> dict[str, bytes]:
    """The texts `documents` needs, each read by `read(path in the tarball)`."""
    return {path: read(path) for path in sorted(_texts_wanted(info))}


def _licence_text(path: str, texts: Mapping[str, bytes]) -> dict[str, Any]:
    if path not in texts:
        raise BadInput(f"licence file {path}: BUILDINFO.txt lists it, but its text was not "
                       f"found in the kit")
    named = licence_policy.identify_text(texts[path])
    # a text of one listed licence gets its `id`; others (a NOTICE) are kept by path
    parsed = spdx.parse(named) if named is not None else None
    what = {"id": parsed.render()} if parsed is not None and spdx.is_single_listed_id(parsed) \
        else {"name": f"the terms in {path}"}
    return {"license": {**what,
                        "text": {"contentType": "text/plain", "encoding": "base64",
                                 "content": base64.b64encode(texts[path]).decode("ascii")}}}


def _package_purl(package: str, version: str, manager: str) -> str:
    if manager == "dpkg":
        return _purl(f"deb/{DEB_VENDOR}", None, package, version, arch=DEB_ARCH)
    if manager == "wheel":
        # normalised as the purl spec asks for pypi
        return _purl("pypi", None, re.sub(r"[-_.]+", "-", package).lower(), version)
    if manager == "built":  # from its upstream's release tarball, in the toolchain image
        return _purl("generic", None, package, version)
    raise BadInput(f"package {package} {version}: manager {manager!r} is not dpkg, wheel or "
                   "built")


def _purl(kind: str, namespace: str | None, name: str, version: str, **qualifiers: str) -> str:
    """A package URL (github.com/package-url/purl-spec): each part percent-encoded."""
    path = "/".join(quote(part, safe="") for part in (namespace, name) if part)
    tail = "&".join(f"{key}={quote(value, safe='')}" for key, value in sorted(qualifiers.items()))
    return f"pkg:{kind}/{path}@{quote(version, safe='')}" + (f"?{tail}" if tail else "")


def _hash(hex_digest: str) -> dict[str, str]:
    return {"alg": "SHA-256", "content": hex_digest}


def _properties(**values: str) -> list[dict[str, str]]:
    return [{"name": f"ninfer-kits:{key}", "value": value} for key, value in values.items()]


def _timestamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _subject_uri(subject: Subject) -> str:
    return f"urn:ninfer-kits:kit:{subject.asset}:sha256:{subject.sha256}"


def _dump(document: Mapping[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()

