"""What every `gpuprov` command shares: one error style, strict option parsing, one way to
write a result (stdout, or a file replaced atomically), and target data made harmless before
it reaches a terminal.

Used by gpuprov/cli.py (the entry), scanner/cli*.py and app/cli.py; it imports nothing beyond
typer, click and two small scanner modules, so every command (even a warm host rescan) can
afford it.
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from scanner.terminal import printable

PROG = "gpuprov"
EXIT_USAGE = 2


def _keep_argument_help() -> None:
    """Click 8.5 sets ``help`` in `click.Parameter.__init__`, after typer <= 0.24 has set it on
    its arguments, so every argument's help text vanished; set it again afterwards."""
    if "help" not in inspect.signature(click.Parameter.__init__).parameters:
        return  # click < 8.5: nothing to repair
    init = TyperArgument.__init__
    if getattr(init, "_gpuprov_keeps_help", False):
        return

    @functools.wraps(init)
    def __init__(self: TyperArgument, *args: Any, help: str | None = None, **kw: Any) -> None:
        init(self, *args, help=help, **kw)
        self.help = help

    __init__._gpuprov_keeps_help = True  # type: ignore[attr-defined]
    TyperArgument.__init__ = __init__  # type: ignore[method-assign]


_keep_argument_help()


def code_loaded() -> None:
    """A command's code is loaded: resume the cyclic collector if the entry paused it for
    start-up, leaving what exists now (it lives until exit) out of every collection."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def out(message: str) -> None:
    """A line of a command's result on stdout, with control characters escaped."""
    typer.echo(printable(message))


def say(message: str) -> None:
    """A line for the user on stderr (never the report): progress notes, skipped items."""
    typer.echo(printable(message), err=True)


def error(message: str) -> None:
    """The one error style of every command: ``gpuprov: error: MESSAGE`` on stderr. A message
    of several lines (a YAML error quotes the line at fault under it, a server's answer may
    hold a few) keeps them, each escaped on its own and each further line indented, so that
    none reads as an error of its own; before, they came out as one line with a literal
    ``\\n``."""
    first, *more = message.split("\n")
    say(f"{PROG}: error: {first}")
    for line in more:
        say(f"  {line}")


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` as an error and return the exit to raise: ``raise fail(...)``."""
    error(message)
    return typer.Exit(code)


def write_output(data: str | bytes, output: Path | None) -> None:
    """A command's result: to stdout as it is, or to ``output`` replaced atomically (a reader
    never sees half a report). An unwritable file is a usage error (exit 2), not a traceback."""
    if output is None:
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
        return
    from scanner.fsutil import atomic_write  # tempfile and its imports: not for --version

    payload = data.encode() if isinstance(data, str) else data
    try:
        if _special_file(output):
            # /dev/null, /dev/stdout, a FIFO: written into; a rename would replace the device
            # node itself by a regular file (as root, /dev/null for the whole machine)
            with open(output, "wb") as handle:
                handle.write(payload)
        else:
            atomic_write(output, payload)
    except OSError as e:
        raise fail(f"cannot write {output}: {e.strerror or e}", EXIT_USAGE) from None


def usage_error(message: str, option: str | None = None) -> NoReturn:
    """A usage error (exit 2) reported like click's own, naming ``option`` when given."""
    raise click.UsageError(f"{option}: {message}" if option else message)


def split_list(values: Iterable[str] | None) -> list[str]:
    """Values of a repeatable option, each also split at commas (``--x a,b --x c``)."""
    parts: list[str] = []
    for value in values or ():
        parts.extend(part.strip() for part in value.split(","))
    return parts


class StrictCommand(TyperCommand):
    """A command whose single-valued options may be given once only.

    Click keeps the last value of an option given twice, so ``--trust a.yaml --trust b.yaml``
    would silently drop a.yaml. Options declared ``list[...]`` accumulate instead; a plain
    flag (no value, no ``--no-`` twin) may repeat since repeating it changes nothing.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not ctx.resilient_parsing:
            _refuse_repeats(self, ctx, args)
        return super().parse_args(ctx, args)

    def format_arguments(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Nothing: click 8.5 lists arguments under "Positional arguments", and Typer's plain
        help lists them again under "Arguments" (with the options)."""


def _refuse_repeats(command: click.Command, ctx: click.Context, args: Sequence[str]) -> None:
    try:
        # A second, side-effect-free parse (callbacks run later, in handle_parse_result) just
        # to see each option occurrence; a parse error is left for the real parse to report.
        _, _, order = command.make_parser(ctx).parse_args(args=list(args))
    except click.ClickException:
        return
    seen = Counter(p.name for p in order if isinstance(p, click.Option))
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or seen[param.name] < 2:
            continue
        if param.multiple or param.count or (param.is_flag and not param.secondary_opts):
            continue
        names = "/".join(param.opts + param.secondary_opts)
        raise click.UsageError(
            f"{names} was given {seen[param.name]} times; it takes one value", ctx=ctx
        )


class Group(TyperGroup):
    """The `gpuprov` command group: usage errors printed as ``gpuprov: error: ...`` (exit 2).

    Typer would draw them in a box and add its own "Did you mean" to click's; both are off.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                # The help text is the message (Typer's renderer may have printed it already).
                if e.format_message().strip():
                    e.show()
            else:
                show_usage_error(e)
            sys.exit(e.exit_code)
        except click.Abort:
            error("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def show_usage_error(e: click.ClickException) -> None:
    """Usage line, where to get help, then ``gpuprov: error: ...`` (argparse's shape)."""
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.UsageError) and ctx is not None:
        typer.echo(ctx.get_usage(), err=True)
        if ctx.command.get_help_option(ctx) is not None:
            typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    error(e.format_message())


class _Typer(typer.Typer):
    """A Typer whose commands are `StrictCommand` unless told otherwise, so a command added
    later cannot silently take the last of two values again."""

    def command(self, *args: Any, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(*args, cls=cls or StrictCommand, **kwargs)


def typer_app(*, cls: type[Group] = Group, **kwargs: Any) -> typer.Typer:
    """A Typer (sub)app with gpuprov's group class (or a subclass), strict commands, plain
    help and without Typer's extra suggestions.

    Plain (click's) help rather than Typer's rich panels: rendering them imports rich's
    markdown, syntax and traceback modules, 0.1 s of the 0.2 s that `gpuprov scan --help`
    may take (issue 8).
    """
    kwargs.setdefault("no_args_is_help", True)
    return _Typer(
        cls=cls,
        rich_markup_mode=None,
        suggest_commands=False,
        add_completion=False,
        pretty_exceptions_enable=False,
        **kwargs,
    )


def _special_file(path: Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
