"""What a kit is made of: its folder, BUILDINFO.txt, manifest, flavours, SBOM and provenance,
licences and owed sources (docs/build.md, docs/buildinfo.md, docs/attestations.md)."""
