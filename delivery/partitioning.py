"""The send ledger's day partitions (decision 122): messages and their attempts."""

from __future__ import annotations

from core.partitions.spec import DayPartitioned, LeafUnique, register

# In flight: a partition holding one of these is never dropped (expiry reports it instead).
IN_FLIGHT = "status IN ('QUEUED', 'SCHEDULED', 'SENDING', 'AMBIGUOUS')"

MESSAGES = register(DayPartitioned(
    table="delivery_emailmessage",
    # Unique per day; across days the accept statements check from the idempotency floor.
    leaf_unique=(LeafUnique("msg_idempotency_key_uniq", ("idempotency_key",)),),
    in_flight=IN_FLIGHT,
    # Few rows, kept as long as their message: deleted with its day.
    dependents=(("delivery_deadletter", "message_id"),),
))
ATTEMPTS = register(DayPartitioned(table="delivery_deliveryattempt"))


def earlier_key_sql(key: str) -> str:
    """A subquery: a message of idempotency key `key` (an SQL expression) since the idempotency
    floor, its one parameter (core.partitions.routing.idempotency_floor)."""
    return f"SELECT 1 FROM {MESSAGES.table} e WHERE e.idempotency_key = {key} AND e.id >= %s"
