"""Packaging lives in pyproject.toml; this file adds the one package discovery cannot name.

``[tool.setuptools.packages.find]`` finds every package under icesql/ and catalog_store/, so a new
folder ships without a change here. grammar/ sits at the top of the repository (one .lark file, as
STYLE.md asks) and ships as ``icesql.grammar`` through ``package-dir``: discovery would call it
``grammar``, so it is appended to the packages found. .ci/check_wheel.py compares the built wheel
with the source tree.
"""

from setuptools import setup
from setuptools.dist import Distribution


class IcesqlDistribution(Distribution):
    def parse_config_files(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().parse_config_files(*args, **kwargs)  # applies pyproject.toml (the packages found)
        if "icesql.grammar" not in (self.packages or []):
            self.packages = [*(self.packages or []), "icesql.grammar"]


setup(distclass=IcesqlDistribution)
