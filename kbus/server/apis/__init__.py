"""The broker's API handlers; importing this package fills the dispatch table (registry.API_TABLE)."""

from kbus.server.apis import admin, api_versions, fetch, groups, metadata, offsets, produce  # noqa: F401
