"""Helpers shared by the unit and integration tests (importable as `support`: tests/ is on sys.path)."""
