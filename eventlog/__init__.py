"""The service's event log: what happened to its messages and recipients, in commit order.

One append-only table (`ServiceEvent`) that the layers above write in the same statement or
transaction as the change they record (the ledger's status updates, the ESP events, consent
changes), and that two readers follow with a cursor: the status callbacks posted to a service's
own URL, and `GET /api/v1/events`. Nothing here knows messages or campaigns; an event carries
the references its writer copied into it.
"""
