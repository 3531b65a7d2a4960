"""SaslHandshake (key 17), v0-1: choose the SASL mechanism of a connection on a SASL listener.

The answer lists the listener's enabled mechanisms. An unsupported one is
UNSUPPORTED_SASL_MECHANISM and the connection closes after the answer; a handshake on a
PLAINTEXT listener, or after authenticating, is ILLEGAL_SASL_STATE (Kafka's KafkaApis answer once
the authenticator has handed the connection over). v0 means the tokens follow as raw
size-prefixed frames, v1 that they come in SaslAuthenticate requests.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(17)


@api(17, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    session = ctx.broker.sasl_sessions.get(ctx.connection_id)
    if session is None or session.authenticated or session.server is not None:
        return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    mechanisms = list(session.mechanisms)
    if not session.start(req.mechanism, raw_tokens=ctx.api_version == 0):
        session.close_after_response = True
        return Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
    return Response(error_code=ErrorCode.NONE, mechanisms=mechanisms)
