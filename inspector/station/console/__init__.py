"""The operator console: a live web page served from the station host (docs/console.md).

The station calls :func:`start_console` once (when ``console.enabled``) and then
``console.offer(result, image)`` after each reported part: a bounded deque append,
so the page never slows the line. Everything else (documents, frames, the review
queue, feedback into the footage store) happens on the console's own thread.
Starlette and uvicorn are the ``inspector[console]`` extra, imported on start.
"""

from __future__ import annotations

from typing import Any

from inspector.station.console.config import ConsoleSection, is_loopback


def start_console(station: Any) -> Any:
    """Serve the console of a started station; returns the running :class:`Console`.

    :param station: the station (``station.cfg.console`` holds the settings).
    :raises InspectorError: starlette/uvicorn missing, no token off loopback, the port taken.
    """
    from inspector.station.console.server import Console

    console = Console(station, station.cfg.console)
    console.start()
    return console


__all__ = ["ConsoleSection", "is_loopback", "start_console"]
