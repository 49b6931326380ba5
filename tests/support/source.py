"""The project's own source as the architecture and documentation tests read it."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def layers() -> list[str]:
    """pyproject.toml's layers contract, top (0) to bottom: the packages that run in production."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    return contract["layers"]


def python_files(packages: Iterable[str], *, migrations: bool = False) -> list[Path]:
    """Every module of `packages` (folders under the root), migrations only if asked."""
    return sorted(path for package in packages for path in (ROOT / package).rglob("*.py")
                  if migrations or "migrations" not in path.parts)


def docstring_constants(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (of the module, classes, functions)."""
    bodies = [node.body for node in ast.walk(tree)
              if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)]
    return {id(body[0].value) for body in bodies
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
