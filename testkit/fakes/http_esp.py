"""HTTP fake ESPs: one threaded server base and three provider wire formats.

Why a facade: tests import every HTTP fake from one place while each wire format
lives in its own small module.
"""

from testkit.fakes.http_base import (
    Accepted,
    FakeHTTPServer,
    HttpReply,
    HttpRequest,
    RequestRecord,
    Result,
)
from testkit.fakes.mailgun import FakeMailgun
from testkit.fakes.sendgrid import FakeSendGrid
from testkit.fakes.ses import FakeSES

__all__ = [
    "Accepted",
    "FakeHTTPServer",
    "FakeMailgun",
    "FakeSES",
    "FakeSendGrid",
    "HttpReply",
    "HttpRequest",
    "RequestRecord",
    "Result",
]
