"""JSON schemas of the advisory formats, as their maintainers publish them (data, read with
importlib.resources):

- ``csaf_2.0.json``: OASIS CSAF 2.0 (errata 01), oasis-tcs/csaf
  ``csaf_2.0_errata_01/csaf_json_schema.json`` at 27af37f5c9a1 (OASIS IPR policy, Non-Assertion).
- ``cvss-v2.0.json``, ``cvss-v3.0.json``, ``cvss-v3.1.json``: FIRST's CVSS schemas the CSAF
  schema references, as oasis-tcs/csaf ``csaf_2.0/referenced_schema/first/`` keeps them
  (FIRST.ORG BSD-style licence inside each file).
- ``osv.json``: the OSV schema, ossf/osv-schema ``validation/schema.json`` at 51b8156b69b9
  (Apache-2.0).
- ``openvex_json_schema_0.2.0.json``: the OpenVEX v0.2.0 JSON schema, openvex/spec
  ``openvex_json_schema.json`` at a68ccd19b15a ("schema: Add missing "type" for statements",
  2025-03-31; unchanged up to d29fab0c of 2026-01-16) (CC0 1.0).
"""
