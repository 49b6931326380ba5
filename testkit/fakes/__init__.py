"""Local stand-ins for the outside world: fake HTTP ESPs, a ledger, faults.

The SMTP stand-in the tests use is testkit/smtp.py (`RecordingSmtpServer`, the
`smtp_server` fixture); `devtools/smtp_sink.py` is the product's development sink.

Typical use::

    with FakeSendGrid() as sg:
        sg.faults.error_5xx(503, next_n=2)
        ...  # point the SendGrid provider at sg.url
        assert not sg.ledger.duplicates()
"""

from testkit.fakes.faults import Fault, FaultPlan, Mode
from testkit.fakes.http_esp import FakeHTTPServer, FakeMailgun, FakeSendGrid, FakeSES
from testkit.fakes.ledger import Ledger, LedgerEntry, Outcome

__all__ = [
    "FakeHTTPServer",
    "FakeMailgun",
    "FakeSES",
    "FakeSendGrid",
    "Fault",
    "FaultPlan",
    "Ledger",
    "LedgerEntry",
    "Mode",
    "Outcome",
]
