"""Reading ELF files and kit archives, never running or changing them (DEVELOPING.md, "Layout")."""
