"""Reference catalogs: signed in-toto statements listing known-good GPU library files.

Builders (`wheel`, `redist`, `scan`) make unsigned catalogs; `signing` signs them and turns a
signed catalog into a `VerifiedCatalog` that the provenance verdict uses.
"""
