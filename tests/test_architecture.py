"""Rules of the code's shape that import-linter cannot see (docs/architecture.md, "Layers").

- A message's status is written only by the ledger package (delivery/services/ledger/): no other
  module updates the message table (ORM `.update()` on EmailMessage, or SQL `UPDATE` on its table).
- No app imports another app inside a function body (the way code dodges an import cycle),
  except in `AppConfig.ready()`, where registration points are filled in.
- No model points up a layer (ForeignKey, OneToOne, ManyToMany) and no migration depends on a
  higher app's, except the allow-listed ones, each with its reason (docs/architecture.md,
  "Upward foreign keys").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.db.migrations.loader import MigrationLoader

from tests.support.source import ROOT, layers, python_files

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
    return python_files(APPS)


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
                   "single_message", "operator_rows"):
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


# --- Relations and migrations point down the layers too ----------------------------------------

LAYER = {app: index for index, app in enumerate(layers())}

# Model relations that point up a layer on purpose: "<app>.<Model>.<field>" -> why. Each names
# campaigns.Campaign from a lower app; removing one would need a data migration. Django's
# on_delete of a campaign reaches these rows through them (the lower app never imports campaigns).
UPWARD_RELATIONS = {
    "delivery.EmailMessage.campaign": "the ledger row names its campaign: progress, stats and pause/"
    "cancel select rows by campaign_id, deleting a campaign cascades to its rows (no database "
    "constraint, decision 63; the claim guard's SQL refuses rows of a missing campaign)",
    "feedback.CampaignEventCounter.campaign": "one counter row per campaign, keyed by it (primary "
    "key), deleted with it",
    "feedback.ReputationHold.campaign": "records which campaign the reputation guard paused; "
    "deleted with it",
    "scheduling.Schedule.campaign": "the one-off campaign, or the latest recurring run's; set to "
    "NULL when it is deleted, the schedule stays",
}

# Migrations that depend on a higher app's: (app, higher app) -> (why, the migrations).
UPWARD_MIGRATIONS = {
    ("delivery", "campaigns"): (
        "EmailMessage.campaign (above); 0001-0006 also met Contact while it lived in campaigns",
        {"0001_initial", "0002_emailmessage_cancel_key_emailmessage_contact",
         "0004_provider_message_id_index", "0005_lean_message_indexes",
         "0006_scheduled_messages_index", "0009_message_campaign_no_db_constraint",
         "0010_recipient_index_rows_of_no_contact"}),
    ("feedback", "campaigns"): (
        "CampaignEventCounter.campaign and ReputationHold.campaign (above)", {"0002_feedback_loop"}),
    ("scheduling", "campaigns"): ("Schedule.campaign (above)", {"0001_initial"}),
    ("audience", "campaigns"): (
        "audience's models moved out of campaigns (state-only operations): their history starts "
        "in campaigns' migrations", {"0001_models_from_campaigns", "0002_tables_renamed"}),
    ("audience", "delivery"): (
        "the same move: delivery re-pointed its Contact foreign key before the tables were renamed",
        {"0002_tables_renamed"}),
}


def _our_app(label: str) -> bool:
    return label in LAYER


def upward_relations() -> set[str]:
    """"<app>.<Model>.<field>" of every relation a model declares towards a higher layer."""
    found = set()
    for model in apps.get_models():
        source = model._meta.app_label
        for field in model._meta.get_fields():
            if not field.is_relation or field.auto_created or field.related_model is None:
                continue  # reverse accessors belong to the other side
            target = field.related_model._meta.app_label
            if _our_app(source) and _our_app(target) and LAYER[target] < LAYER[source]:
                found.add(f"{source}.{model.__name__}.{field.name}")
    return found


def upward_migration_dependencies() -> dict[tuple[str, str], set[str]]:
    """(app, higher app) -> the app's migrations that depend on a migration of the higher one."""
    found: dict[tuple[str, str], set[str]] = {}
    for (app, name), migration in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.items():
        for dependency_app, _ in migration.dependencies:
            if _our_app(app) and _our_app(dependency_app) and LAYER[dependency_app] < LAYER[app]:
                found.setdefault((app, dependency_app), set()).add(name)
    return found


def test_no_model_points_up_a_layer():
    assert sorted(upward_relations() - UPWARD_RELATIONS.keys()) == [], (
        "point down instead (a registration point, or an id column), or allow-list it with the reason")


def test_every_allowed_upward_relation_still_exists():
    assert sorted(UPWARD_RELATIONS.keys() - upward_relations()) == []


def test_no_migration_depends_on_a_higher_app():
    allowed = {pair: names for pair, (_, names) in UPWARD_MIGRATIONS.items()}
    unexpected = {pair: sorted(extra) for pair, names in upward_migration_dependencies().items()
                  for extra in [names - allowed.get(pair, set())] if extra}
    assert unexpected == {}


def test_every_allowed_upward_migration_dependency_still_exists():
    found = upward_migration_dependencies()
    stale = {pair: sorted(names - found.get(pair, set()))
             for pair, (_, names) in UPWARD_MIGRATIONS.items() if names - found.get(pair, set())}
    assert stale == {}


def test_the_layers_are_the_apps():
    assert set(LAYER) >= {config.label for config in apps.get_app_configs()
                          if (ROOT / config.label).is_dir() and config.path.startswith(str(ROOT))}
