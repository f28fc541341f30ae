"""What pyproject.toml cannot say: the wheel carries the demo's workspace. `fixtures/workspace` (the
one copy in the repository, which the tests use too) is mapped to the package data
`soma_lsp/demo_workspace`, so `soma-lsp demo` works where the package is installed without the
repository. Everything else about the package is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

WORKSPACE = "soma_lsp.demo_workspace"
# its directories (model/, configs/) are named as packages too: setuptools warns that it will stop
# shipping data in directories it was not told about
workspace = [WORKSPACE, *(f"{WORKSPACE}.{name}" for name in find_namespace_packages(where="fixtures/workspace"))]

setup(
    packages=[*find_namespace_packages(include=["soma_lsp", "soma_lsp.*"]), *workspace],
    package_dir={WORKSPACE: "fixtures/workspace"},
    # "*" leaves hidden paths out: the pool lives in .soma/, and .trash/ is one of its examples
    package_data={**{name: ["*"] for name in workspace}, WORKSPACE: ["*", ".soma/**/*", ".soma/pool/.trash/*"]},
)
