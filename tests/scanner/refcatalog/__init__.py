"""Tests of reference catalogs."""
