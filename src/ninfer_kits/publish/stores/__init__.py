"""The stores a release can go to, by the name `--to` takes: each a module with one class that
speaks the `Store` protocol (publish/store.py). `local` needs nothing; `b2` and `github` are
imported only when chosen (b2sdk and PyGithub are the `publish` extra): a dry run, which
reaches no store, needs neither; GitHub's download URLs (for its notes) are here for it."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING

from ninfer_kits.remote import github_web

if TYPE_CHECKING:
    from ninfer_kits.matrix import GitHubTarget

STORE_NAMES = ("b2", "github", "local")  # also the publishing order: blob storage first
# Whose download URLs the release notes show when a release goes to several stores: the
# GitHub release page is where users find the notes, so its own URLs come first.
NOTES_PREFERENCE = ("github", "b2", "local")


def download_base(target: GitHubTarget, tag: str) -> str:
    """Where a published GitHub release's assets are downloaded from."""
    quoted = urllib.parse.quote(tag, safe="")
    return f"{github_web(target.api)}/{target.repository}/releases/download/{quoted}"
