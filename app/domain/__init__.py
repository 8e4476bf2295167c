"""Domain services: ingest, inventory queries and token management. No FastAPI imports here."""
