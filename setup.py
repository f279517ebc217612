"""Packages for setuptools (everything else is in pyproject.toml): the python/ tree, and the upstream
patch series in upstream/ installed as the data package sglang_kimi_eagle3.upstream_series, so that
`sglang-kimi-eagle3 upstream export` finds it after a non-editable install too."""

from setuptools import find_packages, setup

setup(
    packages=find_packages("python") + ["sglang_kimi_eagle3.upstream_series"],
    package_dir={"": "python", "sglang_kimi_eagle3.upstream_series": "upstream"},
)
