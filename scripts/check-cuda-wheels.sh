#!/usr/bin/env bash
# Check the CUDA wheel pins of the Debian Dockerfiles against PyPI.
#
# usage: check-cuda-wheels.sh [FILE...]
#
# Reads every `NAME==VERSION --hash=sha256:HEX` pin of the given files (default: the pin lists
# dockerfiles/context/cuda-wheels/*.txt and dockerfiles/runtime-wheels-debian.Dockerfile)
# and asks PyPI's JSON API (https://pypi.org/pypi/NAME/json; PYPI_JSON_URL overrides the
# https://pypi.org/pypi part) for that release's files. A pin is good when its hash is the sha256
# of that release's one manylinux x86_64 wheel (platform tags differ per wheel: manylinux_2_25 for
# cupti, manylinux2010 for nvvm, manylinux1 for nvtx ...). Prints one line per pin; exits 1 when
# any pin is wrong, yanked or unknown, 2 on usage errors. Needs python3 and network access to
# PyPI (SSL_CERT_FILE or PIP_CERT names a CA bundle when TLS goes through a local CA); no root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-}" in
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
esac
if [ "$#" -eq 0 ]; then
    set -- "$here"/dockerfiles/context/cuda-wheels/*.txt \
           "$here/dockerfiles/runtime-wheels-debian.Dockerfile"
fi
for file in "$@"; do
    [ -f "$file" ] || { echo "check-cuda-wheels: no such file: $file" >&2; exit 2; }
done

exec python3 - "$@" <<'PY'
import json, os, re, ssl, sys, urllib.request

PIN = re.compile(r"(?:^|')([A-Za-z0-9_.-]+)==([^ ']+) --hash=sha256:([0-9a-f]{64})", re.M)
X86 = re.compile(r"-manylinux[0-9a-z_]*x86_64(\.|$)")
base = os.environ.get("PYPI_JSON_URL", "https://pypi.org/pypi").rstrip("/")
cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") or None
context = ssl.create_default_context(cafile=cafile)
cache: dict[str, dict] = {}
bad = 0
for path in sys.argv[1:]:
    pins = PIN.findall(open(path, encoding="utf-8").read())
    if not pins:
        print(f"{path}: no pins found", file=sys.stderr)
        bad += 1
    for name, version, digest in pins:
        if name not in cache:
            with urllib.request.urlopen(f"{base}/{name}/json", timeout=60, context=context) as r:
                cache[name] = json.load(r)["releases"]
        files = [f for f in cache[name].get(version, [])
                 if f["filename"].endswith(".whl") and X86.search(f["filename"][:-4])]
        where = f"{os.path.basename(path)}: {name}=={version}"
        if len(files) != 1:
            print(f"BAD  {where}: {len(files)} manylinux x86_64 wheels on PyPI")
            bad += 1
        elif files[0]["digests"]["sha256"] != digest:
            print(f"BAD  {where}: pinned {digest[:16]}…, PyPI has "
                  f"{files[0]['digests']['sha256']} ({files[0]['filename']})")
            bad += 1
        elif files[0].get("yanked"):
            print(f"BAD  {where}: {files[0]['filename']} is yanked")
            bad += 1
        else:
            print(f"ok   {where} {files[0]['filename']}")
sys.exit(1 if bad else 0)
PY
