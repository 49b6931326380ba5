"""HTTP fake ESPs: one threaded server base and three provider wire formats.

Why a facade: tests import every HTTP fake from one place while each wire format
lives in its own small module.
"""

from tests.fakes.http_base import (
    Accepted,
    FakeHTTPServer,
    HttpReply,
    HttpRequest,
    Result,
)
from tests.fakes.mailgun import FakeMailgun
from tests.fakes.sendgrid import FakeSendGrid
from tests.fakes.ses import FakeSES

__all__ = [
    "Accepted",
    "FakeHTTPServer",
    "FakeMailgun",
    "FakeSES",
    "FakeSendGrid",
    "HttpReply",
    "HttpRequest",
    "Result",
]
