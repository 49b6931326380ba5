"""Clock injection and timestamp-window checks shared by the verifiers."""

from __future__ import annotations

from collections.abc import Callable

from delivery.providers.webhooks.errors import Reason, WebhookVerificationError

# Returns "now" as POSIX seconds; tests inject a fixed value instead of time.time.
Clock = Callable[[], float]


def check_window(timestamp: float, now: float, tolerance: float) -> None:
    """Reject timestamps further than ``tolerance`` seconds from ``now`` either way.

    Future timestamps are bounded too: a signed request "from the future" would otherwise
    stay valid for longer than the window, widening the replay opportunity.
    """
    if now - timestamp > tolerance:
        raise WebhookVerificationError(
            Reason.STALE_TIMESTAMP, f"{now - timestamp:.0f}s old > {tolerance}s"
        )
    if timestamp - now > tolerance:
        raise WebhookVerificationError(
            Reason.FUTURE_TIMESTAMP, f"{timestamp - now:.0f}s ahead > {tolerance}s"
        )


def parse_epoch(value: object) -> float:
    """Parse a POSIX-seconds timestamp given as int or decimal string."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise WebhookVerificationError(Reason.BAD_TIMESTAMP, "not an integer timestamp")
    try:
        return float(int(value))
    except ValueError as err:
        raise WebhookVerificationError(Reason.BAD_TIMESTAMP, "not an integer timestamp") from err
