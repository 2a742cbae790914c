"""What is published beside the kits: checksums and their signature, the ledger, the kit index,
REPRODUCTION.json and ninfer-kits.pyz (docs/publish.md)."""
