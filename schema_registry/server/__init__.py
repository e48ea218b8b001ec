"""The registry HTTP server: ``create_app(settings)`` for an ASGI app, ``serve(settings)`` to run it."""

from __future__ import annotations

import gc
import logging

from schema_registry.server.app import create_app
from schema_registry.settings import Settings

logger = logging.getLogger(__name__)


FULL_COLLECTION_THRESHOLD = 100
"""Young-generation collections between two full ones (CPython's default: 10)."""


def quiet_collector() -> None:
    """Keep the cyclic garbage collector's full collections rare and short in a long-running server.

    A full collection traverses every tracked object while holding the GIL, stalling every request in flight: with
    ~90k objects of start-up and ~300 per cached parsed schema, 40-250 ms, and by CPython's defaults one every ~200
    registrations. What exists at start-up (modules, classes, the app and its routes) lives as long as the process,
    so it is frozen out of the collector's way; and full collections wait for ten times more young collections
    than by default. Cyclic garbage dies young (the young collections, left as they are, still find it); the
    registry's long-lived objects (the caches) are freed by reference counting when evicted.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_THRESHOLD)
    logger.debug("collector: %d objects frozen, thresholds %s", gc.get_freeze_count(), gc.get_threshold())


def serve(settings: Settings) -> None:
    """Run the registry with uvicorn until interrupted.

    Raises:
        StoreError: the store cannot be opened; SettingsError: the auth config is invalid.
    """
    import uvicorn

    app = create_app(settings)
    quiet_collector()
    logger.info("schema registry listening on http://%s:%d", settings.host, settings.port)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")


__all__ = ["Settings", "create_app", "quiet_collector", "serve"]
