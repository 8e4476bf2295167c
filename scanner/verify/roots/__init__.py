"""Pinned roots shipped as package data: public-good.json (Sigstore production trusted root)
and sigstore-tuf-root.json (the TUF root that `trust refresh-root` starts its chain from)."""
