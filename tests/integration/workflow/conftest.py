"""Fixtures of the workflow tests: a fresh copy of the project per test (or per module)."""

from __future__ import annotations

import pytest

from tests.support.workflow import copy_project


@pytest.fixture
def project(tmp_path):
    return copy_project(tmp_path / "project")
