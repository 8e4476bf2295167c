"""JSON schemas of the advisory formats, as their maintainers publish them (data, read with
importlib.resources):

- ``csaf_2.0.json``: OASIS CSAF 2.0 (errata 01), oasis-tcs/csaf
  ``csaf_2.0_errata_01/csaf_json_schema.json`` at 27af37f5c9a1 (OASIS IPR policy, Non-Assertion).
- ``cvss-v2.0.json``, ``cvss-v3.0.json``, ``cvss-v3.1.json``: FIRST's CVSS schemas the CSAF
  schema references, as oasis-tcs/csaf ``csaf_2.0/referenced_schema/first/`` keeps them
  (FIRST.ORG BSD-style licence inside each file).
- ``osv.json``: the OSV schema, ossf/osv-schema ``validation/schema.json`` at 51b8156b69b9
  (Apache-2.0).
"""
