"""Email feedback (ESP webhooks): signature verification and event normalisation.

Everything under this package is pure Python and must not import Django, so it can be
unit-tested and reused outside the web process.
"""
