"""manage.py import_suppressions: validation, batches, idempotence, resumption from a line."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from audience.models import Suppression
from tests.support.commands import command_run

pytestmark = pytest.mark.django_db


def test_import_suppressions_validates_batches_and_is_idempotent(tmp_path):
    csv_file = tmp_path / "list.csv"
    csv_file.write_text("email,reason\nA@example.com,complaint\nb@example.com,\nnot-an-address,\n"
                        "c@example.com%0d%0aBcc: x@example.com,\na@example.com,\nd@example.com,bogus\n")
    out, _ = command_run("import_suppressions", str(csv_file), "--dry-run", "--batch-size", "2")
    assert "would import 3" in out and not Suppression.objects.exists()
    out, err = command_run("import_suppressions", str(csv_file), "--batch-size", "2")
    assert "invalid 2" in out and "imported 3" in out and "committed through line 3" in err
    assert Suppression.objects.get(email="a@example.com").reason == "complaint"
    assert Suppression.objects.get(email="d@example.com").reason == "manual"
    out, _ = command_run("import_suppressions", str(csv_file))          # rerun: nothing new
    assert "imported 0" in out and Suppression.objects.count() == 3


def test_import_suppressions_resumes_from_a_line(tmp_path):
    csv_file = tmp_path / "list.csv"
    csv_file.write_text("email\n" + "".join(f"u{n}@example.com\n" for n in range(10)))
    command_run("import_suppressions", str(csv_file), "--start-line", "7")
    assert sorted(Suppression.objects.values_list("email", flat=True)) == \
        [f"u{n}@example.com" for n in range(5, 10)]


def test_import_suppressions_needs_an_email_column(tmp_path):
    csv_file = tmp_path / "bad.csv"
    csv_file.write_text("address\nx@example.com\n")
    with pytest.raises(CommandError, match="email"):
        command_run("import_suppressions", str(csv_file))
