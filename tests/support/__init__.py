"""Helpers shared by the unit and integration tests (not tests themselves)."""
