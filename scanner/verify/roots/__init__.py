"""Pinned Sigstore trusted roots shipped as package data (public-good.json: production)."""
