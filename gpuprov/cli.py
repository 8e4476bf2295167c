"""The whole `gpuprov` command line, loading each command group only when it is used.

Start-up is part of every scan, so this module imports typer and `scanner.cli_common` only:
`gpuprov --version` loads no command, `gpuprov scan ...` loads `scanner.cli` alone (never the
HTTP client, the trust stack or the service), `gpuprov --help` loads every group to list it.
A command module adds its commands with ``register(app)``; `COMMANDS` says which module holds
which command, so a new command is one line here and one ``register`` call there.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import click
import typer
import typer.main

from scanner import __version__
from scanner.cli_common import Group, code_loaded, typer_app

#: Every command, in the order `gpuprov --help` lists them, and the module that registers it.
COMMANDS: dict[str, str] = {
    "scan": "scanner.cli",
    "push": "scanner.cli_agent",
    "agent": "scanner.cli_agent",
    "verify": "scanner.cli_provenance",
    "gate": "scanner.cli_gate",
    "serve": "app.cli",
    "catalog": "scanner.cli_provenance",
    "trust": "scanner.cli_provenance",
    "db": "app.cli",
    "token": "app.cli",
    "advisories": "app.cli_advisories",
    "webhooks": "app.cli_webhooks",
}


def commands_of(module_name: str) -> dict[str, click.Command]:
    """The click commands that ``module_name``'s ``register(app)`` adds, by name."""
    module = importlib.import_module(module_name)
    holder = typer_app()
    holder.callback()(_no_options)  # a group even when the module has one command
    module.register(holder)
    group = typer.main.get_command(holder)
    assert isinstance(group, click.Group)
    return dict(group.commands)


def _no_options() -> None:
    """Placeholder callback of the group that collects a module's commands."""


class LazyGroup(Group):
    """The root group: its command names are static (`COMMANDS`); a command's module is
    imported the first time the command is looked up (to run it, or to list its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            self.commands.update(commands_of(module))
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in COMMANDS:
            # A mistyped command: click's "Did you mean" draws on the commands loaded so far.
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


app = typer_app(
    name="gpuprov",
    cls=LazyGroup,
    help="Inventory and provenance of GPU libraries (cuDNN, CUDA, NCCL, ...) in hosts and images.",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"gpuprov {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """gpuprov: which GPU libraries run where, are they the vendor's bytes, may this ship?"""
    code_loaded()


def main() -> None:
    """Entry point of the ``gpuprov`` console script (and of ``python -m gpuprov``)."""
    app()
