"""The stores' clients, each speaking `Store` (publish/store.py); b2 and github need the
`publish` extra. Each store's kind is in ninfer_kits/stores."""
