"""Repositories: every SQL query of the service lives in this package."""
