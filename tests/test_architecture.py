"""Rules of the code's shape that import-linter cannot see (docs/architecture.md, "Layers").

- A message's status is written only by the ledger package (delivery/services/ledger/): no other
  module updates the message table (ORM `.update()` on EmailMessage, or SQL `UPDATE` on its table).
- No app imports another app inside a function body (the way code dodges an import cycle),
  except in `AppConfig.ready()`, where registration points are filled in.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["analytics", "campaigns", "transactional", "scheduling", "feedback", "delivery",
        "audience", "templates", "clients", "core"]
LEDGER = ROOT / "delivery" / "services" / "ledger"
MESSAGE_TABLE_NAMES = r"(TABLE|MESSAGE_TABLE|EmailMessage\._meta\.db_table)"
# The table's name taken from the ledger package (as its own modules do) rather than the model.
IMPORTS_MESSAGE_TABLE = (
    rf"from (delivery\.services\.ledger|\.)[\w.]* import "
    rf"(\([^)]*\b{MESSAGE_TABLE_NAMES}\b[^)]*\)|[^\n(]*\b{MESSAGE_TABLE_NAMES}\b)"
)


def _modules() -> list[Path]:
    return sorted(
        path for app in APPS for path in (ROOT / app).rglob("*.py") if "migrations" not in path.parts
    )


def _message_status_writes(source: str) -> list[str]:
    orm = re.findall(r"EmailMessage\.objects[^\n]*?\.update\(", source)
    binds_message_table = re.search(rf"{MESSAGE_TABLE_NAMES}\s*=\s*EmailMessage\._meta\.db_table", source)
    imports_message_table = re.search(IMPORTS_MESSAGE_TABLE, source)
    sql = re.findall(rf"UPDATE \{{{MESSAGE_TABLE_NAMES}\}}", source) if binds_message_table or (
        imports_message_table or "EmailMessage._meta.db_table" in source) else []
    return orm + [f"UPDATE {{{name}}}" for name in sql]


def test_only_the_ledger_writes_message_status():
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in _modules() if not path.is_relative_to(LEDGER)
        for found in [_message_status_writes(path.read_text())] if found
    }
    assert offenders == {}


def test_the_check_finds_a_status_write():
    """The rule above would catch the shapes it looks for."""
    assert _message_status_writes("EmailMessage.objects.filter(id=1).update(status='SENT')")
    assert _message_status_writes(
        "TABLE = EmailMessage._meta.db_table\nsql = f'UPDATE {TABLE} SET status = %s'")
    assert _message_status_writes(
        "from delivery.services.ledger.sql import (\n    TABLE,\n)\nsql = f'UPDATE {TABLE} SET status = %s'")
    # Each module of the ledger that changes statuses, by SQL or by the ORM.
    for module in ("send_path", "sweeps", "requeues", "campaign_rows", "scheduled_rows", "reported",
                   "single_message"):
        assert _message_status_writes((LEDGER / f"{module}.py").read_text()), module


def _late_cross_app_imports(path: Path) -> list[str]:
    own_app = path.relative_to(ROOT).parts[0]
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name == "ready":
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module:
                top = inner.module.split(".")[0]
            elif isinstance(inner, ast.Import):
                top = inner.names[0].name.split(".")[0]
            else:
                continue
            if top in APPS and top != own_app:
                found.append(f"{node.name}: {top}")
    return found


@pytest.mark.parametrize("app", APPS)
def test_no_app_imports_another_inside_a_function(app: str):
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in _modules() if path.relative_to(ROOT).parts[0] == app
        for found in [_late_cross_app_imports(path)] if found
    }
    assert offenders == {}
