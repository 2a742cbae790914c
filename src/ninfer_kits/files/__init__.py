"""Files on this machine: written whole or not at all, locked, unpacked safely, walked and
removed."""
