"""The ``/api/v1`` routers."""

from fastapi import APIRouter

from app.http.api import (
    advisories,
    analyses,
    assets,
    ci_trust,
    compliance,
    gate,
    group_mappings,
    inventory,
    policies,
    proposals,
    provenance,
    reports,
    teams,
    tokens,
    vex,
    webhooks,
)

router = APIRouter(prefix="/api/v1")
router.include_router(reports.router)
router.include_router(assets.router)
router.include_router(inventory.router)
router.include_router(tokens.router)
router.include_router(provenance.router)
router.include_router(policies.router)
router.include_router(gate.router)
router.include_router(compliance.router)
router.include_router(ci_trust.router)
router.include_router(advisories.router)
router.include_router(vex.router)
router.include_router(analyses.router)
router.include_router(proposals.router)
router.include_router(webhooks.router)
router.include_router(teams.router)
router.include_router(group_mappings.router)
