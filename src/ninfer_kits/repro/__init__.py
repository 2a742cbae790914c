"""Reproducibility: build a kit twice and prove the two are the same, or say why they are not.

`diff.compare(a, b)` compares two kits (tarballs, kit folders dist/<tag>/, unpacked folders or
single files) member by member and explains each difference by a named cause: a build-id, a
temporary file name in a FILE symbol, an embedded path or time, one kernel of a fatbin entry...
`diff.render` says it in words, `diff.to_json` as a versioned document.
"""
