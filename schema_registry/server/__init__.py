"""The registry HTTP server: ``create_app(settings)`` for an ASGI app, ``serve(settings)`` to run it."""

from __future__ import annotations

import logging

from schema_registry.server.app import create_app
from schema_registry.settings import Settings

logger = logging.getLogger(__name__)


def serve(settings: Settings) -> None:
    """Run the registry with uvicorn until interrupted.

    Raises:
        StoreError: the store cannot be opened; SettingsError: the auth config is invalid.
    """
    import uvicorn

    app = create_app(settings)
    logger.info("schema registry listening on http://%s:%d", settings.host, settings.port)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")


__all__ = ["Settings", "create_app", "serve"]
