"""The stores a release can go to, by the name `--to` takes: each a module with one class that
speaks the `Store` protocol (publish/store.py). `local` needs nothing; `b2` and `github` are
imported only when chosen (b2sdk and PyGithub are the `publish` extra)."""

from __future__ import annotations

STORE_NAMES = ("b2", "github", "local")  # also the publishing order: blob storage first
# Whose download URLs the release notes show when a release goes to several stores: the
# GitHub release page is where users find the notes, so its own URLs come first.
NOTES_PREFERENCE = ("github", "b2", "local")
