"""ApiVersions (key 18), v0-4.

Lists every registered API with the versions it is registered for, so what we advertise is
what we implement. Any ApiVersions version is accepted: one we do not know is answered by the
dispatcher with a v0 body and UNSUPPORTED_VERSION (KIP-511). v3+ checks the client software
name and version against Kafka's pattern (INVALID_REQUEST otherwise).
"""

from __future__ import annotations

import re

from broker.handlers.registry import HANDLERS, api
from protocol.errors import ErrorCode
from protocol.messages import response_class

Response = response_class(18)
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def advertised_versions() -> list[tuple[int, int, int]]:
    return sorted((s.key, s.advertised_min, s.max_version) for s in HANDLERS.values())


@api(18, (0, 4))
def handle(ctx, req):
    if ctx.api_version >= 3 and not (
        _SOFTWARE.match(req.client_software_name or "") and _SOFTWARE.match(req.client_software_version or "")
    ):
        return Response(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
    keys = [Response.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised_versions()]
    return Response(error_code=0, api_keys=keys, throttle_time_ms=0)
