"""When the inspector is on and when its actions are allowed.

The page is served with ``/metrics`` (``metrics.port`` > 0) unless ``inspector.enable`` is false.
Its one action that changes state, aborting a hanging transaction, is allowed when the endpoint
listens on a loopback address only (``metrics.host`` 127.0.0.1, the default, or ::1 / localhost),
or when ``inspector.actions.enable`` is true: a page reachable from other machines shows
everything but changes nothing unless the operator said so.
"""

from __future__ import annotations

import ipaddress
from typing import Any

MAX_BODY = 64 * 1024  # the largest POST the page takes (an abort's form)


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def inspector_enabled(config: Any) -> bool:
    """The page (and the recording behind its timelines) is on."""
    return int(config.get("metrics.port") or 0) > 0 and _flag(config.get("inspector.enable"), True)


def is_loopback(host: str | None) -> bool:
    """Whether a listening host is reachable from this machine only (an empty host: every address)."""
    host = (host or "").strip().strip("[]")
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def actions_enabled(config: Any) -> bool:
    """The abort action is allowed: on loopback, or when ``inspector.actions.enable`` is true."""
    return is_loopback(str(config.get("metrics.host") or "")) or _flag(config.get("inspector.actions.enable"), False)
