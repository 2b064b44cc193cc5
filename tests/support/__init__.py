"""Helpers shared by the test suite (imported as `tests.support.<module>`; the project root is on the
pytest path through pyproject.toml)."""
