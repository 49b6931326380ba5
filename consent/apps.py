from django.apps import AppConfig


class ConsentConfig(AppConfig):
    name = "consent"

    def ready(self) -> None:
        """Plug the recipient's links into the send path (delivery/extensions.py): one-click
        unsubscribe headers and the preference link with its footer, in broadcast mail."""
        from consent.links import one_click_headers, preference_link
        from delivery import extensions

        extensions.register_header_provider(one_click_headers)
        extensions.register_render_extender(preference_link)
