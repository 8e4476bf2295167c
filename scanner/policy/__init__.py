"""Promotion policy: the policy document, the controls catalog, asset facts and evaluation.

Pure modules (no I/O beyond reading the packaged data tables): the CLI gate
(scanner/cli_gate.py) and the service both evaluate with them.
"""
