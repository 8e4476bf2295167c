"""The inventory domain: request filters, current-state queries, their JSON shapes, SBOM export
and the flat CSV/JSON export. Routes call these modules; they call the storage repositories."""
