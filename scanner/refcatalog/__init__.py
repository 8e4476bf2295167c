"""Reference catalogs: in-toto statements listing known-good GPU library files.

`model` is the catalog format; the builders (`wheel`, `redist`, `scan`) make unsigned catalogs
from vendor artifacts. Signing and verifying a catalog is the verify stage's job
(`scanner.verify.catalogs`): this package imports nothing from `scanner.verify`.
"""
