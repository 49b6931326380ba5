"""One ESP in one place (docs/contributing.md, "ESP provider"; decision 87).

- The wire key under which we send our message id to the ESPs (`MESSAGE_ID_KEY`) is written as
  a string in one module only; the rest import it. tests/ is not searched: the fake ESPs there
  stand in for the ESPs and keep their own copy, as the real ones do.
- Every ESP in the registry that is not plain SMTP has a webhook (a verifier and a normaliser),
  and feedback serves it at /webhooks/<name>/.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from django.urls import reverse

from delivery.providers import ESPS, esps_with_webhooks
from delivery.providers.base import MESSAGE_ID_KEY
from delivery.providers.webhooks import EspWebhook
from feedback.normalize import NormalizationError, normalize
from tests.support.source import docstring_constants

ROOT = Path(__file__).resolve().parents[2]
# testkit/fakes stand in for the ESPs: they speak the wire format from the ESP's side and keep
# their own copy of the key, as the real ESP does.
NOT_SOURCE = {"tests", "testkit", "docs", "node_modules", "__pycache__", "var"}
ESPS_WITHOUT_WEBHOOK = {"smtp"}  # plain SMTP reports nothing after the transaction's reply


def _source_files(root: Path) -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(root):  # does not follow the .venv symlink
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in NOT_SOURCE]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return found


def modules_writing(text: str, root: Path) -> list[str]:
    """Modules under `root` with a string literal (docstrings aside) that holds `text`."""
    found = []
    for path in _source_files(root):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = docstring_constants(tree)
        if any(isinstance(node, ast.Constant) and isinstance(node.value, str) and text in node.value
               and id(node) not in docstrings for node in ast.walk(tree)):
            found.append(str(path.relative_to(root)))
    return sorted(found)


def test_the_message_id_wire_key_is_written_once():
    assert modules_writing(MESSAGE_ID_KEY, ROOT) == ["delivery/providers/base.py"]


def test_the_search_finds_a_second_copy(tmp_path: Path):
    """The rule above would catch a copy in a module, in an f-string too, and not a docstring."""
    (tmp_path / "a.py").write_text('"""Sends notifier_message_id."""\nKEY = "notifier_message_id"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text('def f(v):\n    return f"v:notifier_message_id={v}"\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "c.py").write_text('KEY = "notifier_message_id"\n')
    (tmp_path / "d.py").write_text('"""notifier_message_id in a docstring only."""\n')
    assert modules_writing(MESSAGE_ID_KEY, tmp_path) == ["a.py", "pkg/b.py"]


def test_every_esp_but_smtp_has_a_webhook():
    without = {name for name, esp in ESPS.items() if esp.webhook_module is None}
    assert without == ESPS_WITHOUT_WEBHOOK
    assert set(esps_with_webhooks()) == set(ESPS) - ESPS_WITHOUT_WEBHOOK


@pytest.mark.parametrize("name", sorted(set(ESPS) - ESPS_WITHOUT_WEBHOOK))
def test_an_esp_webhook_verifies_normalizes_and_is_served(name: str):
    esp = ESPS[name]
    assert esp.name == name
    webhook = esp.webhook()
    assert isinstance(webhook, EspWebhook)
    assert callable(webhook.verifier) and callable(webhook.normalize)
    assert reverse(f"webhook-{name}") == f"/webhooks/{name}/"


def test_an_esp_without_a_webhook_has_no_events():
    with pytest.raises(NormalizationError):
        normalize("smtp", {})
