"""Writes of the scheduling app (services: `<entity>_<action>`, keyword-only arguments)."""
