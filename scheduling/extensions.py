"""Where the app that owns the scheduled thing plugs into the scheduling engine.

Scheduling keeps the time (the due set, dispatch, recurring runs, the scheduler process); it
does not know what a recurring run creates or what a one-off schedule stands for. Campaigns
registers that from its `AppConfig.ready()`:

- the run launcher: `launch(definition, client_id, key_type)` creates what one recurring run sends (a
  campaign) and returns it, or raises DRF's ValidationError when there is nothing to send;
- the definition validator: `validate(definition, client_id)` raises DRF's ValidationError when a
  recurring schedule's definition could not launch (checked when the schedule is created), and
  returns the definition to store (its references made stable, e.g. a topic's name as its id);
- the target canceller: `cancel(campaign_id)` stops what a cancelled one-off schedule launched;
- sweeps: functions the scheduler's lock holder runs in its sweep thread (campaign recovery);
- due listeners: `f(campaign_ids=[...])` told which campaigns' rows the dispatcher just released
  (a scheduled campaign whose first rows fall due starts SENDING).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RunLauncher = Callable[[dict[str, Any], "int | None", str], Any]
TargetCanceller = Callable[[int], None]
DefinitionValidator = Callable[[dict[str, Any], "str | None"], dict[str, Any]]

_launchers: list[RunLauncher] = []
_validators: list[DefinitionValidator] = []
_cancellers: list[TargetCanceller] = []
_sweeps: list[Callable[[], None]] = []
DueListener = Callable[..., object]  # called as f(campaign_ids=[...])

_due_listeners: list[DueListener] = []


class NothingRegisteredError(RuntimeError):
    """A recurring schedule ran with no app registered to launch its runs."""


def register_run_launcher(launch: RunLauncher) -> None:
    _launchers[:] = [launch]  # one kind of scheduled thing today: the latest registration wins


def register_definition_validator(validate: DefinitionValidator) -> None:
    _validators[:] = [validate]  # paired with the run launcher: the latest registration wins


def register_target_canceller(cancel: TargetCanceller) -> None:
    if cancel not in _cancellers:
        _cancellers.append(cancel)


def register_sweep(sweep: Callable[[], None]) -> None:
    if sweep not in _sweeps:
        _sweeps.append(sweep)


def register_due_listener(listener: DueListener) -> None:
    if listener not in _due_listeners:
        _due_listeners.append(listener)


def launch_run(definition: dict[str, Any], client_id: int | None, key_type: str) -> Any:
    """`key_type`: the schedule's (its creator's key type), which the run's campaign inherits."""
    if not _launchers:
        raise NothingRegisteredError("no app registered a launcher for recurring runs")
    return _launchers[0](definition, client_id, key_type)


def validate_definition(definition: dict[str, Any], client_id: str | None) -> dict[str, Any]:
    """The definition to store, or DRF's ValidationError."""
    if not _validators:
        raise NothingRegisteredError("no app registered a validator for recurring runs")
    return _validators[0](definition, client_id)


def cancel_target(campaign_id: int) -> None:
    for cancel in _cancellers:
        cancel(campaign_id)


def run_sweeps() -> None:
    for sweep in _sweeps:
        sweep()


def campaigns_fell_due(campaign_ids: list[int]) -> None:
    for listener in _due_listeners:
        listener(campaign_ids=campaign_ids)
