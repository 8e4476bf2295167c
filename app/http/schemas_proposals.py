"""Answer models of the runtime proposals (``/api/v1/assets/{id}/proposals``,
``/api/v1/proposals/{id}``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.http.schemas import Page
from app.http.schemas_advisories import AnalysisOut


class ProposalFileOut(BaseModel):
    path: str = Field(description="the library file, as the host's latest scan found it")
    sha256: str = Field(description="its bytes on disk")


class ProposalWindowOut(BaseModel):
    start: str = Field(description="the first --runtime report that saw the files unmapped")
    end: str = Field(description="the latest such report")
    observations: int = Field(description="how many --runtime reports in the window saw them")
    processes_min: int = Field(description="the fewest processes' maps one of them read")
    processes_max: int = Field(description="the most processes' maps one of them read")
    first_scan_id: int | None = Field(description="the first report's scan (null: pruned)")
    last_scan_id: int | None = Field(description="the latest report's scan (null: pruned)")


class ProposalOut(BaseModel):
    id: int
    asset_id: int
    cve: str
    product: str = Field(description="the product found whose files these are (nvjpeg, ...)")
    files: list[ProposalFileOut]
    status: str = Field(description="proposed, accepted, dismissed or withdrawn")
    justification: str = Field(
        description="what accepting records: not_affected with this OpenVEX justification"
    )
    window: ProposalWindowOut
    expires: str = Field(
        description="the accepted analysis's expiry: the window's end plus "
        "GPUPROV_RUNTIME_PROPOSAL_DAYS"
    )
    expired: bool = Field(description="the expiry has passed: it can no longer be accepted")
    created_at: str
    decided_at: str | None = Field(description="when it was accepted or dismissed")
    decided_by: str | None = Field(description="who accepted or dismissed it")
    analysis_id: int | None = Field(description="the analysis its acceptance recorded")
    withdrawn_at: str | None
    reason: str | None = Field(description="why the service withdrew it")


class ProposalPage(Page):
    items: list[ProposalOut]


class AcceptedOut(BaseModel):
    proposal: ProposalOut
    analysis: AnalysisOut
