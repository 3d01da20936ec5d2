"""The package list, which pyproject.toml cannot express: every package found under
noetl_compile/ and airflow_plugin/, plus noetl_compile.grammar, whose files live in grammar/
(``[tool.setuptools.package-dir]``) where discovery does not look. Everything else is in
pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["noetl_compile*", "airflow_plugin*"])
    + ["noetl_compile.grammar"]
)
