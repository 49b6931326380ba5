"""Local stand-ins for the outside world: fake ESPs, an SMTP sink, a ledger, faults.

Typical use::

    with FakeSendGrid() as sg:
        sg.faults.error_5xx(503, next_n=2)
        ...  # point the SendGrid provider at sg.url
        assert not sg.ledger.duplicates()
"""

from tests.fakes.faults import Fault, FaultPlan, Mode
from tests.fakes.http_esp import FakeHTTPServer, FakeMailgun, FakeSendGrid, FakeSES
from tests.fakes.ledger import Ledger, LedgerEntry, Outcome
from tests.fakes.smtp_sink import SmtpSink

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
    "SmtpSink",
]
