"""The TCP side: one asyncio Protocol per connection, requests answered strictly in order.

Like Kafka's processor (which mutes a channel while a request is in flight), a connection runs
one request at a time: synchronous handlers answer inline, an async one (Fetch long-poll,
JoinGroup) parks the pipeline until it completes. Reading pauses as soon as a whole request is
waiting (more requests wait in the kernel's socket buffer, not in memory here), when the
transport's write buffer is full, and while the requests queued on all connections hold more
than ``queued.max.request.bytes`` (Kafka's memory pool). One connection's queued requests are
answered in slices of at most SLICE_S of the loop's time, so pipelining clients share it.

Connections beyond ``max.connections`` (or ``listener.name.<l>.max.connections``) and
``max.connections.per.ip`` (``max.connections.per.ip.overrides``) are closed on accept, as
Kafka's ConnectionQuotas closes them. Before SASL authentication a frame may be at most
``sasl.server.max.receive.size`` bytes (Kafka's fix for CVE-2022-34917).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, cast

import structlog

from broker.net.dispatch import CloseConnection, Dispatcher, Encoded
from broker.net.sasl import AuthenticationFailed, SaslSession
from broker.net.socket_writer import SocketWriter
from broker.net.tls import SSL_PROTOCOLS, server_context
from broker.security.principal import ANONYMOUS, NoMatchingRule
from protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrame
from protocol.headers import MalformedHeader, peek_api
from storage.clock import TimerHandle
from storage.log.file_region import FileRegion

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.config.broker_config import BrokerConfig

log = structlog.get_logger(__name__)

SLICE_S = 0.002  # at most this long answering one connection's queued requests before the others
MAX_COALESCED_BUFFERS = 256  # answers of one pump pass written together (writev), at most this many buffers
MAX_HELD = 64  # answers a fault rule holds on one connection before it reads no more requests
_ids = itertools.count(1)
_SIZE = struct.Struct(">i")
# What a connection on a SASL listener may send before it has authenticated: ApiVersions,
# SaslHandshake, SaslAuthenticate.
SASL_ALLOWED_APIS = frozenset({18, 17, 36})
_CLOSED, _HANDLED, _DISPATCH = object(), object(), object()


class Connection(asyncio.Protocol):
    transport: asyncio.Transport  # from connection_made on: the broker only knows connections after it

    def __init__(self, broker: Broker, dispatcher: Dispatcher, listener: str) -> None:
        self.broker = broker
        self.dispatcher = dispatcher
        self.listener = listener
        self.decoder = FrameDecoder(broker.config.get("socket.request.max.bytes"))
        self.pending: deque[bytes | bytearray] = deque()
        self.pending_bytes = 0
        self.task: asyncio.Task | None = None
        self.writer: SocketWriter | None = None  # created on the first response with file regions
        self.sending: asyncio.Future | None = None  # such a response still going out
        self.reading_paused = False
        self.writing_paused = False
        self.closed = False
        self.peer = "?"
        self.local_host = "127.0.0.1"
        self.id = f"c{next(_ids)}"
        self.last_active = broker.wire_clock.monotonic()  # the last read or write, for connections.max.idle.ms
        self.sasl: SaslSession | None = None  # on a SASL listener: the exchange, until authenticated
        self.tls = False  # an SSL or SASL_SSL listener's connection: no sendfile (the bytes are encrypted)
        self.tls_principal = ANONYMOUS  # the client certificate's principal (ssl.principal.mapping.rules)
        self.counted = False  # in the broker's connection counts (ConnectionQuotas)
        self.peer_ip = ""
        self.memory_paused = False  # paused for queued.max.request.bytes
        self.held = 0  # what this connection counts in broker.queued_request_bytes
        self.frame_reserved = False  # the frame being received has its whole size counted
        self._resume_scheduled = False
        # answers a fault rule holds (a delay, an RTT): (loop time to send at, buffers), in order
        self.held_answers: deque[tuple[float, list]] = deque()
        self._held_timer: TimerHandle | None = None
        self.silent = False  # a fault rule dropped an answer: nothing more is read or sent

    # --- asyncio callbacks ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's (uvloop's or asyncio's)
        _set_buffer_sizes(transport.get_extra_info("socket"), self.broker.config)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.peer_ip = peer[0] if peer else ""
        local = transport.get_extra_info("sockname")
        self.local_host = local[0] if local else "127.0.0.1"
        refused = self.broker.connection_quotas.admit(self.listener, self.peer_ip)
        if refused is not None:
            log.info("connection refused", listener=self.listener, peer=self.peer, reason=refused)
            self.closed = True
            self.transport.abort()
            return
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.tls = True
            try:
                self.tls_principal = self.broker.tls_principal(self.listener, ssl_object)
            except NoMatchingRule as e:  # Kafka fails the authentication and closes
                log.info("connection refused", listener=self.listener, peer=self.peer, reason=str(e))
                self.closed = True
                self.transport.abort()
                self.broker.connection_quotas.release(self.listener, self.peer_ip)
                return
        self.counted = True
        self.broker.connections.add(self)
        self.sasl = self.broker.new_sasl_session(self.listener)
        if self.sasl is not None:
            self.broker.sasl_sessions[self.id] = self.sasl
        self.broker.metrics.connection_opened(self.listener)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release_queued()
        if not self.counted:
            return
        self.counted = False
        self.broker.connection_quotas.release(self.listener, self.peer_ip)
        self.broker.connections.discard(self)
        self.broker.quotas.forget_connection(self.id)
        self.broker.sasl_sessions.pop(self.id, None)
        self.broker.metrics.connection_closed(self.listener)
        # A request in flight is carried out to its end and only its answer dropped, as Kafka's
        # handlers finish what they started: cancelling it midway (a coordinator write awaiting
        # replication) would leave a transaction's pending state behind for good.
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self._held_timer is not None:
            self._held_timer.cancel()
            self._held_timer = None
        self.held_answers.clear()

    def data_received(self, data: bytes) -> None:
        if self.silent:
            return
        self.last_active = self.broker.wire_clock.monotonic()
        decoder = self.decoder
        # Before SASL authentication a frame may be at most sasl.server.max.receive.size.
        decoder.max_size = self.broker.max_frame_size if self.sasl is None or self.sasl.authenticated \
            else self.broker.sasl_max_receive_size
        try:
            frames = decoder.feed(data)
        except (FrameTooLarge, InvalidFrame) as e:
            self._close(str(e))
            return
        if frames:
            self.pending.extend(frames)
            self.pending_bytes += sum(len(f) for f in frames)
            self.frame_reserved = False  # the frame it was for is whole now
        self._account()
        if frames:
            self._pump()
        if not self.closed and not self.reading_paused and self.pending:
            self._pause_reading()  # one request at a time, as Kafka mutes a channel with one in flight

    def _pause_reading(self) -> None:
        self.reading_paused = True
        self.transport.pause_reading()

    def _account(self) -> None:
        """Kafka's memory pool (queued.max.request.bytes): a request's whole size is taken from it
        when its size prefix arrives, if any is left (SimpleMemoryPool, not strict); if none is,
        the connection reads nothing more until requests anywhere are answered."""
        broker = self.broker
        size = self.decoder.frame_size
        part = 0  # the start of a frame read before the pool was asked: one read's worth, not counted
        if size > 0:
            if self.frame_reserved:
                part = size
            elif broker.queued_max_request_bytes <= 0 or \
                    broker.queued_request_bytes - self.held < broker.queued_max_request_bytes:
                self.frame_reserved = True
                part = size
            elif not self.memory_paused and not self.closed:
                self.memory_paused = True
                broker.memory_paused.add(self)
                if not self.reading_paused:
                    self._pause_reading()
        held = self.pending_bytes + part
        broker.queued_request_bytes += held - self.held
        self.held = held

    def _release_queued(self) -> None:
        """Give back what this connection holds of queued.max.request.bytes."""
        self.pending.clear()
        self.pending_bytes = 0
        self.decoder.reset()
        self.frame_reserved = False
        if self.held:
            self.broker.queued_request_bytes -= self.held
            self.held = 0
            self.broker.resume_memory_paused()
        self.broker.memory_paused.discard(self)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._pump()

    # --- the request pipeline -----------------------------------------------------------------

    def _pump(self) -> None:
        """Answer queued requests in order until one needs to wait.

        The answers to the requests of one pass go out in one write: a pipelining client (a
        producer with several requests in flight) gets one wake-up and the kernel one send
        instead of one per request.
        """
        out: list = []
        self._resume_scheduled = False
        started = time.perf_counter()  # how long this connection held the loop
        while self.pending and self.task is None and self.sending is None and not self.writing_paused \
                and not self.closed and not self.silent:
            if self._muted():
                break
            if time.perf_counter() - started > SLICE_S:  # let the other connections have the loop
                self._resume_scheduled = True
                asyncio.get_running_loop().call_soon(self._pump)
                break
            frame = self.pending.popleft()
            self.pending_bytes -= len(frame)
            self.held -= len(frame)
            self.broker.queued_request_bytes -= len(frame)
            if self.sasl is not None and not self.sasl.authenticated:
                verdict = self._sasl_gate(self.sasl, frame, out)
                if verdict is _CLOSED:
                    return
                if verdict is _HANDLED:
                    continue
            try:
                result = self.dispatcher.handle(frame, self.peer, self.local_host, self.id, self.listener,
                                                self.principal)
            except CloseConnection as e:
                self._flush(out)
                self._close(str(e))
                return
            except Exception:
                log.exception("request failed; closing connection", connection=self.id, peer=self.peer)
                self._flush(out)
                self._close("internal error")
                return
            if isinstance(result, Encoded):
                if self.sasl is not None and self.sasl.close_after_response:
                    self._flush(out + result.buffers)
                    self._close("SASL authentication failed")
                    return
                if result.delay or result.drop or self.held_answers:  # a fault rule's: after what went before
                    self._flush(out)
                    out = []
                    self._hold(result)
                    if self.silent:
                        return
                    continue
                if result.regions:
                    self._flush(out)
                    out = []
                    self._send_regions(result.buffers)
                    continue
                out += result.buffers
                if len(out) > MAX_COALESCED_BUFFERS:
                    self._flush(out)
                    out = []
            elif result is not None:
                self.task = asyncio.ensure_future(result)
                self.task.add_done_callback(self._async_done)
                self.broker.inflight.add(self.task)
        self._flush(out)
        self.broker.resume_memory_paused()
        self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        if self.reading_paused and not self.closed and not self.pending and not self.memory_paused \
                and not self.silent and len(self.held_answers) < MAX_HELD:
            self.reading_paused = False
            self.transport.resume_reading()

    def resume_after_memory(self) -> None:
        """queued.max.request.bytes has room again: try to take this connection's request from it."""
        self.memory_paused = False
        self._account()
        self._maybe_resume_reading()

    def _sasl_gate(self, session: SaslSession, frame: bytes | bytearray, out: list[bytes]) -> object:
        """Before authentication only ApiVersions and the SASL APIs pass (Kafka's
        SaslServerAuthenticator); after a v0 handshake each frame is a raw token, answered here."""
        if session.raw_tokens:
            try:
                token = session.evaluate(bytes(frame))
            except AuthenticationFailed as e:
                self._flush(out)
                self._close(f"SASL authentication failed: {e}")
                return _CLOSED
            out += [_SIZE.pack(len(token)), token]
            return _HANDLED
        try:
            api_key, _ = peek_api(frame)
        except MalformedHeader:
            api_key = -1
        if api_key not in SASL_ALLOWED_APIS:
            self._flush(out)
            self._close(f"Unexpected Kafka request of type {api_key} during SASL handshake")
            return _CLOSED
        return _DISPATCH

    @property
    def principal(self) -> str:
        """The SASL user once authenticated, else the TLS client's, else ANONYMOUS."""
        if self.sasl is not None and self.sasl.principal is not None:
            return self.sasl.principal
        return self.tls_principal

    def _muted(self) -> bool:
        """A client over its quota: no further request is read until its throttle time has passed."""
        until = self.broker.quotas.muted_until.get(self.id)
        if until is None:
            return False
        wait = until - self.broker.wire_clock.monotonic()
        if wait <= 0:
            del self.broker.quotas.muted_until[self.id]
            return False
        self.broker.wire_clock.call_later(wait, self._pump)
        return True

    def _async_done(self, task: asyncio.Task) -> None:
        self.task = None
        self.broker.inflight.discard(task)
        if task.cancelled():
            return
        if self.closed:  # the client has gone: the answer is dropped (its file regions closed)
            if task.exception() is None and isinstance(task.result(), Encoded):
                _close_regions(task.result().buffers)
            return
        exc = task.exception()
        if isinstance(exc, CloseConnection):
            self._close(str(exc))
            return
        if exc is not None:
            log.error("request failed; closing connection", connection=self.id, peer=self.peer,
                      exc_info=(type(exc), exc, exc.__traceback__))
            self._close("internal error")
            return
        result = task.result()
        if result is not None:
            if result.delay or result.drop or self.held_answers:
                self._hold(result)
                if self.silent:
                    return
            elif result.regions:
                self._send_regions(result.buffers)
            else:
                self._flush(result.buffers)
        self._pump()

    # --- answers held by fault rules ------------------------------------------------------------

    def _hold(self, result: Encoded) -> None:
        """Send ``result`` after its delay and after every answer held before it (the wire keeps
        the order), or (``drop``) never: the connection then goes silent, as a link that lost the
        answer, until the client gives up on it and closes it."""
        buffers = result.buffers
        if result.regions:  # sent from memory when held: the file regions are read now
            buffers = [b.read() if type(b) is FileRegion else b for b in buffers]
            _close_regions(result.buffers)
        if result.drop:
            self.silent = True
            self.held_answers.clear()
            if not self.reading_paused and not self.closed:
                self._pause_reading()
            return
        # Due times on the wire clock, read now: uvloop's loop.time() is cached at the start of the
        # loop's pass and its timers have millisecond steps, so an answer could leave early.
        clock = self.broker.wire_clock
        at = max(clock.monotonic() + result.delay, self.held_answers[-1][0] if self.held_answers else 0.0)
        self.held_answers.append((at, buffers))
        if self._held_timer is None:
            self._held_timer = clock.call_later(at - clock.monotonic(), self._release_held)
        if len(self.held_answers) >= MAX_HELD and not self.reading_paused and not self.closed:
            self._pause_reading()  # a client pipelining into a long delay waits in the kernel

    def _release_held(self) -> None:
        self._held_timer = None
        clock = self.broker.wire_clock
        now = clock.monotonic()
        out: list = []
        while self.held_answers and self.held_answers[0][0] <= now:  # never before its delay is up
            out += self.held_answers.popleft()[1]
        self._flush(out)
        if self.held_answers:  # the next one's, or this one's again when the timer came early
            self._held_timer = clock.call_later(self.held_answers[0][0] - now, self._release_held)
        elif not self.closed:
            self._pump()
            self._maybe_resume_reading()

    def _flush(self, buffers: list) -> None:
        if buffers and not self.closed and not self.silent:
            self.last_active = self.broker.wire_clock.monotonic()
            self.transport.writelines(buffers)

    def _send_regions(self, buffers: list) -> None:
        """A response holding file regions: sendfile to the socket (``SocketWriter``); the next
        request is answered once it is out. Copied through the transport when there is no socket."""
        if self.closed:
            _close_regions(buffers)
            return
        try:
            if self.writer is None:
                sock = None if self.tls else self.transport.get_extra_info("socket")
                if sock is None:  # TLS encrypts in user space: the regions are read and written through it
                    copied = [b.read() if type(b) is FileRegion else b for b in buffers]
                    _close_regions(buffers)
                    self._flush(copied)
                    return
                self.writer = SocketWriter(asyncio.get_running_loop(), self.transport, sock.fileno())
            done = self.writer.write(buffers)
        except OSError as e:
            _close_regions(buffers)
            self._close(f"write failed: {e}", quiet=isinstance(e, ConnectionError))
            return
        self.last_active = self.broker.wire_clock.monotonic()
        if done is not None:
            self.sending = done
            done.add_done_callback(self._sent)

    def _sent(self, done: asyncio.Future) -> None:
        self.sending = None
        error = None if done.cancelled() else done.exception()
        if self.closed:
            return
        if error is not None:
            self._close(f"write failed: {error}", quiet=isinstance(error, ConnectionError))
            return
        self._pump()

    def close_if_idle(self, now: float, idle_s: float) -> bool:
        """Kafka's idle expiry (connections.max.idle.ms): no read or write for that long, and no
        request still being answered, closes the connection. True when it was closed."""
        if self.closed or self.task is not None or self.sending is not None or self.held_answers \
                or now - self.last_active < idle_s:
            return False
        self._close(f"idle for more than {idle_s * 1000:.0f} ms", quiet=True)
        return True

    def _close(self, reason: str, quiet: bool = False) -> None:
        """Close the connection; ``quiet`` for the peer having gone (nothing to warn about)."""
        if self.closed:
            return
        (log.debug if quiet else log.warning)("closing connection", connection=self.id, peer=self.peer, reason=reason)
        self.closed = True
        self._release_queued()
        self.transport.close()


def _close_regions(buffers: list) -> None:
    for b in buffers:
        if type(b) is FileRegion:
            b.close()


def _set_buffer_sizes(sock: socket.socket | None, config: BrokerConfig) -> None:
    """SO_SNDBUF / SO_RCVBUF from ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``,
    as Kafka's acceptor sets them on every connection (-1: the OS default, autotuned)."""
    if sock is None:
        return
    for option, key in ((socket.SO_SNDBUF, "socket.send.buffer.bytes"), (socket.SO_RCVBUF, "socket.receive.buffer.bytes")):
        size = config.get(key)
        if size != -1:
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
            except OSError as e:
                log.warning("cannot set socket buffer size", option=key, size=size, error=str(e))


async def start_listeners(broker: Broker) -> list[asyncio.base_events.Server]:
    broker.config.validate_listeners()
    loop = asyncio.get_running_loop()
    dispatcher = Dispatcher(broker)
    servers = []
    protocols = broker.config.listener_security_protocols()
    for name, host, port in broker.config.listeners():
        if name == "CONTROLLER":
            continue
        tls = server_context(broker.config, name) if protocols.get(name) in SSL_PROTOCOLS else None
        server = await loop.create_server(
            lambda name=name: Connection(broker, dispatcher, name),
            host or None,
            port,
            reuse_address=True,
            backlog=1024,
            ssl=tls,
        )
        bound = server.sockets[0].getsockname()
        broker.bound_ports[name] = bound[1]
        log.info("listening", listener=name, host=host or "0.0.0.0", port=bound[1])
        servers.append(server)
    return servers
