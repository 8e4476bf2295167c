"""Where a host scan reads its node facts (`NodeInputs`): a light module, imported by the
scan options without loading the readers."""

from __future__ import annotations

from msgspec import Struct


class NodeInputs(Struct, frozen=True):
    """Where a host scan reads node facts; None: the scanned root's own (``ROOT/proc``)."""

    enabled: bool = True
    proc: str | None = None
    sys: str | None = None
    #: saved ``nvidia-smi -q -x`` output; without it the live root's nvidia-smi is run
    nvidia_smi_xml: str | None = None
    #: saved ``nvidia-container-cli list`` output
    container_cli_list: str | None = None
    #: more CDI spec files, outside the root
    extra_cdi: tuple[str, ...] = ()
