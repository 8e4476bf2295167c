"""Regular expressions of values the service accepts, shared by the checks that refuse the others
and by the API document that describes them: written with ``\\uXXXX`` escapes, explicit classes
and no lookaround, so Python's ``re``, ECMA-262 (OpenAPI) and Rust's ``regex`` (pydantic) read
them alike."""

from __future__ import annotations

#: what ``str.strip()`` removes (Unicode White_Space) and the C0 and C1 controls, as a class body
SPACE_OR_CONTROL = (
    r"\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
#: the C0 and C1 controls, as a class body
CONTROL = r"\u0000-\u001f\u007f-\u009f"


def trimmed_text(max_length: int) -> str:
    """1 to ``max_length`` characters without a control character, not starting or ending with
    white space (``max_length`` >= 2)."""
    edge = f"[^{SPACE_OR_CONTROL}]"
    return f"^{edge}(?:[^{CONTROL}]{{0,{max_length - 2}}}{edge})?$"
