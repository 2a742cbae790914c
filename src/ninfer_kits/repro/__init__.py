"""Reproducibility: build a kit twice and prove the two are the same, or say why they are not
(docs/repro.md). `diff.compare(a, b)`, then `diff.render` or `diff.to_json`."""
