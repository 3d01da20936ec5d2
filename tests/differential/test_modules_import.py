"""Every module under tests/differential imports: a module pytest never collects (the recorder,
the generators, the specs) would otherwise break unseen, as a bad merge of
record_divergences.py once did."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

HERE = Path(__file__).parent
MODULES = sorted(
    "tests.differential." + ".".join(path.relative_to(HERE).with_suffix("").parts)
    for path in HERE.rglob("*.py")
    if path.name != "__init__.py" and "cases" not in path.relative_to(HERE).parts
)


def test_the_package_has_its_modules():
    # The glob itself must find the modules the suite leans on, or the test below checks nothing.
    assert "tests.differential.record_divergences" in MODULES
    assert "tests.differential.dsl_key_cases" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)
