"""gpuprov service: fleet inventory, policy, gate and dashboard over ingested CycloneDX BOMs."""
