"""The `gpuprov` command line: the one entry point that composes the scanner's commands
(`scanner/cli*.py`) and the service's (`app/cli.py`). Neither half imports it."""
