"""SaslAuthenticate (key 36), v0-2: one SASL token each way, after SaslHandshake v1.

A failed exchange answers SASL_AUTHENTICATION_FAILED with the reason and closes the connection,
as Kafka does. Sessions do not expire (``connections.max.reauth.ms`` is 0, Kafka's default), so
v1+ answers a session lifetime of 0. On a SASL listener before any SaslHandshake the connection
is closed (Kafka's SaslServerAuthenticator: "Unexpected Kafka request of type SASL_AUTHENTICATE
during SASL handshake"); elsewhere, or once authenticated: ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.net.dispatch import CloseConnection
from broker.net.sasl import AuthenticationFailed
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(36)


@api(36, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    session = ctx.broker.sasl_sessions.get(ctx.connection_id)
    if session is not None and session.server is None and not session.authenticated:
        raise CloseConnection("Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake")
    if session is None or session.server is None or session.authenticated:
        return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                        error_message="Unexpected SaslAuthenticate request", auth_bytes=b"", session_lifetime_ms=0)
    try:
        token = session.evaluate(bytes(req.auth_bytes))
    except AuthenticationFailed as e:
        session.close_after_response = True
        return Response(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(e), auth_bytes=b"",
                        session_lifetime_ms=0)
    return Response(error_code=ErrorCode.NONE, error_message=None, auth_bytes=token, session_lifetime_ms=0)
