"""The verify stage's one refusal: a signature, signer or statement was checked and refused.

Every verifier raises it with the reason; callers report the reason (and, in a scan, record it
as data). Its own module so that verifiers need not import the trust policy to raise it.
"""

from __future__ import annotations

from scanner.errors import VerifyError


class Rejected(VerifyError):
    """A signature, signer or statement was checked and refused; the message says why."""
