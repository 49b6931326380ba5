"""Test hooks named in settings (FEEDBACK_SNS_CERTIFICATE_STORE / FEEDBACK_SNS_CONFIRMER).

The web server under test (live_server, same process) builds its SNS verifier from these: the
certificate store serves the test signer's certificate and records every URL asked for; the
confirmer records subscription confirmations instead of calling AWS.
"""

from __future__ import annotations

from delivery.providers.ses.sns_certs import StaticCertificateStore

current_store = StaticCertificateStore()
confirmed: list[str] = []


def certificate_store() -> StaticCertificateStore:
    return current_store


def confirmer():
    return confirmed.append
