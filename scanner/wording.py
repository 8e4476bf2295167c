"""Counted nouns in messages and pages ("1 asset", "2 assets"), shared by the scanner's
commands and the service (a pure module: it imports nothing)."""

from __future__ import annotations


def plural(noun: str, n: int, many: str | None = None) -> str:
    """``noun`` as ``n`` of it reads: itself for one, else ``many`` (default: noun + "s")."""
    return noun if n == 1 else (many if many is not None else noun + "s")


def counted(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and its noun: ``1 asset``, ``0 assets``, ``2 libraries`` (``many`` irregular)."""
    return f"{n} {plural(noun, n, many)}"
