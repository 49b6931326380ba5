"""Where the owner of a campaign plugs into feedback, so feedback never imports campaigns.

The reputation guard decides that a campaign's bounce or complaint rate is too high; pausing
it (stopping the fan-out, releasing claimed rows) is the campaigns app's business, which it
registers from its `AppConfig.ready()`:

- campaign pausers: `pause(campaign_id, reason)`, called once per hold the guard records.
"""

from __future__ import annotations

from collections.abc import Callable

CampaignPauser = Callable[[int, str], None]

_pausers: list[CampaignPauser] = []


def register_campaign_pauser(pause: CampaignPauser) -> None:
    if pause not in _pausers:
        _pausers.append(pause)


def campaign_pause(campaign_id: int, reason: str) -> None:
    for pause in _pausers:
        pause(campaign_id, reason)
