"""DRF plumbing shared by every API: errors, bounded fields, middleware, pagination, parsers,
the OpenAPI schema class and the local Redoc page."""
