"""Text that came from a scanned target, made safe to show on a terminal.

Shared by the CLI's messages and the table encoder (scanner/report.py); no dependencies.
"""

from __future__ import annotations

import unicodedata

#: Bidirectional-text controls (category Cf) reorder what a terminal shows ("trojan source").
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: object) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n``, ...).

    File names, package fields and image labels come from the scanned target: an ANSI escape
    in them could repaint the terminal, a newline (or U+2028/U+2029, a line break to many log
    viewers) could forge a line of our own output, and a lone surrogate (an undecodable byte of
    a file name) would crash the write.
    """
    s = str(text)
    if s.isprintable():
        return s
    out: list[str] = []
    for ch in s:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs", "Zl", "Zp") or ch in _BIDI:
            code = ord(ch)
            out.append(
                {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
                or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            )
        else:
            out.append(ch)
    return "".join(out)
