"""How the program is set: its environment variables (docs/settings.md), its shipped files, and the
TOML readers that say where a file is wrong."""
