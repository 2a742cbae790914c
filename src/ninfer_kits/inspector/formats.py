"""What a kit archive is, by its first bytes, and sizes in words: the little of archive.py that
`inspect` needs before it knows it has an archive at all."""

from __future__ import annotations

DEFAULT_MEMBER_LIMIT = 4 << 30
HEAD_BYTES = 512

# First bytes → the format, as said in messages.
SUPPORTED = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
)
UNSUPPORTED = (
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
    (b"PK\x03\x04", "a zip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x04\x22\x4d\x18", "LZ4-compressed"),
    (b"LZIP", "lzip-compressed"),
    (b"\x89LZO", "lzop-compressed"),
    (b"Rar!", "a RAR archive"),
    (b"\x5d\x00\x00", "LZMA-compressed (.lzma)"),
    (b"\x1f\x9d", "compress-ed (.Z)"),
)
SUPPORTED_WORDS = "a tar archive, plain or compressed with gzip, xz or bzip2"


def archive_format(head: bytes) -> str | None:
    """"gzip", "xz", "bzip2" or "tar" (its magic at 257), or None."""
    for magic, name in SUPPORTED:
        if head.startswith(magic):
            return name
    if head[257:262] == b"ustar":
        return "tar"
    return None


def unsupported_format(head: bytes) -> str | None:
    return next((name for magic, name in UNSUPPORTED if head.startswith(magic)), None)


def size_words(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            value = size / (1 << shift)
            return f"{value:.1f} {unit}" if value % 1 else f"{int(value)} {unit}"
    return f"{size} bytes"
