"""Rates in DRF notation: "100/min", "5/s", "1000/hour", "20000/day"."""

from __future__ import annotations

from dataclasses import dataclass

_PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
            "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


@dataclass(frozen=True)
class Rate:
    limit: int
    period_seconds: int

    @property
    def per_second(self) -> float:
        return self.limit / self.period_seconds

    def __str__(self) -> str:
        unit = {1: "s", 60: "min", 3600: "hour", 86400: "day"}.get(self.period_seconds)
        return f"{self.limit}/{unit}" if unit else f"{self.limit}/{self.period_seconds}s"


def parse_rate(text: str) -> Rate:
    """Parse "N/unit"; raises ValueError with a message fit for an operator."""
    count, _, unit = str(text).strip().partition("/")
    period = _PERIODS.get(unit.strip().lower())
    if not count.strip().isdigit() or period is None or int(count) < 1:
        raise ValueError(f"Invalid rate {text!r}: use N/s, N/min, N/hour or N/day with N >= 1.")
    return Rate(limit=int(count), period_seconds=period)


def validate_rate(text: str) -> None:
    """Django field validator form of parse_rate (empty means "the default")."""
    from django.core.exceptions import ValidationError

    if text:
        try:
            parse_rate(text)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
