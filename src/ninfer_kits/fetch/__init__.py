"""Getting a published kit back: what `ninfer-kits fetch` and `ninfer-kits kit-url` do.

- `locate`: where a kit's release is (the ledger `releases/<tag>.toml`, else the matrix's tag
  and asset and the GitHub API; GitHub, B2's friendly URLs, or a dist-shaped folder);
- `http`: HTTP over the standard library (urllib), with retries, `Range` and redirects that
  never carry a token to another host;
- `download`: one pass over the bytes: written to a temporary name, hashed (sha256, sha1) and
  handed to the extractor as they arrive; an interrupted download resumes where it stopped;
- `identity`: what was asked for (tag, tarball, kit, the record's revision and sha256), and the
  checks that the release located, listed and unpacked is that one;
- `extract`: the kit archive unpacked with the hardened reader (`inspector.archive`) into a
  private staging folder that only a matching checksum turns into `kit/`;
- `fetch`: the whole job, ending in `verify` on this host.

Standard library only (and the rest of ninfer_kits), so that `ninfer-kits.pyz` runs it with
nothing but python3.
"""
