"""The two VEX vocabularies gpuprov speaks, OpenVEX v0.2.0 and CycloneDX 1.6 ``analysis``, and
the one mapping between them (docs/vex.md, "Mapping") that the writer (vex_out.py) and the
reader (vex_in.py) share. Data only.
"""

from __future__ import annotations

from typing import Final, Literal

OPENVEX_CONTEXT: Final = "https://openvex.dev/ns/v0.2.0"

State = Literal["affected", "not_affected", "fixed", "under_investigation"]

#: OpenVEX v0.2.0 §"Status labels" (the matcher's own statuses are these words)
OPENVEX_STATUSES: Final = ("not_affected", "affected", "fixed", "under_investigation")
#: OpenVEX v0.2.0 §"Status justifications" (CISA's five)
OPENVEX_JUSTIFICATIONS: Final = (
    "component_not_present",
    "vulnerable_code_not_present",
    "vulnerable_code_not_in_execute_path",
    "vulnerable_code_cannot_be_controlled_by_adversary",
    "inline_mitigations_already_exist",
)

#: CycloneDX 1.6 ``vulnerabilities[].analysis.state`` / ``.justification`` / ``.response``
CDX_STATES: Final = (
    "resolved",
    "resolved_with_pedigree",
    "exploitable",
    "in_triage",
    "false_positive",
    "not_affected",
)
CDX_JUSTIFICATIONS: Final = (
    "code_not_present",
    "code_not_reachable",
    "requires_configuration",
    "requires_dependency",
    "requires_environment",
    "protected_by_compiler",
    "protected_at_runtime",
    "protected_at_perimeter",
    "protected_by_mitigating_control",
)

#: OpenVEX status -> CycloneDX state (written)
STATE_TO_CDX: Final[dict[str, str]] = {
    "affected": "exploitable",
    "not_affected": "not_affected",
    "fixed": "resolved",
    "under_investigation": "in_triage",
}
#: CycloneDX state -> OpenVEX status (read); false_positive is "not affected" with no CISA
#: justification: it is read with an impact statement saying so
STATE_FROM_CDX: Final[dict[str, State]] = {
    "exploitable": "affected",
    "not_affected": "not_affected",
    "false_positive": "not_affected",
    "resolved": "fixed",
    "resolved_with_pedigree": "fixed",
    "in_triage": "under_investigation",
}

#: OpenVEX justification -> CycloneDX justification (written). Two OpenVEX labels fall on
#: code_not_present (CycloneDX has no "component" level); the OpenVEX label travels beside it
#: in the property ``JUSTIFICATION_PROPERTY`` so a reader loses nothing.
JUSTIFICATION_TO_CDX: Final[dict[str, str]] = {
    "component_not_present": "code_not_present",
    "vulnerable_code_not_present": "code_not_present",
    "vulnerable_code_not_in_execute_path": "code_not_reachable",
    "vulnerable_code_cannot_be_controlled_by_adversary": "requires_environment",
    "inline_mitigations_already_exist": "protected_by_mitigating_control",
}
#: CycloneDX justification -> OpenVEX justification (read), each by CycloneDX 1.6's definition
JUSTIFICATION_FROM_CDX: Final[dict[str, str]] = {
    "code_not_present": "vulnerable_code_not_present",
    "code_not_reachable": "vulnerable_code_not_in_execute_path",
    "requires_configuration": "vulnerable_code_cannot_be_controlled_by_adversary",
    "requires_dependency": "component_not_present",
    "requires_environment": "vulnerable_code_cannot_be_controlled_by_adversary",
    "protected_by_compiler": "inline_mitigations_already_exist",
    "protected_at_runtime": "inline_mitigations_already_exist",
    "protected_at_perimeter": "inline_mitigations_already_exist",
    "protected_by_mitigating_control": "inline_mitigations_already_exist",
}
#: a CycloneDX vulnerability property carrying the exact OpenVEX justification; read only when
#: it agrees with the CycloneDX justification under ``JUSTIFICATION_TO_CDX``
JUSTIFICATION_PROPERTY: Final = "gpuprov:vex:justification"
