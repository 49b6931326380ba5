"""Where campaigns plugs its knowledge into consent, so consent never imports it.

- campaign topic readers: `f(campaign id) -> Topic | None`, the topic of a campaign (None: it has
  none, or it no longer exists). A campaign's one-click link names only the contact and the
  campaign (the format every link already sent has), and its unsubscribe leaves that campaign's
  topic; campaigns registers the reader in its AppConfig.ready().
"""

from __future__ import annotations

from collections.abc import Callable

from audience.models import Topic

CampaignTopicReader = Callable[[int], Topic | None]
_campaign_topic_readers: list[CampaignTopicReader] = []


def register_campaign_topic_reader(reader: CampaignTopicReader) -> None:
    if reader not in _campaign_topic_readers:
        _campaign_topic_readers.append(reader)


def campaign_topic(campaign_id: int) -> Topic | None:
    """The first registered reader's answer (None with no reader: the whole broadcast stream)."""
    for reader in _campaign_topic_readers:
        return reader(campaign_id)
    return None
