"""Length-prefixed Kafka frames, sans-IO: feed bytes, get whole request frames out.

Chunks are kept in a list and joined once per frame, so a large Produce request arriving in
many TCP reads is copied once, not once per read.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")


class FrameTooLarge(Exception):
    """A frame larger than socket.request.max.bytes (Kafka closes the connection)."""


class InvalidFrame(Exception):
    """A negative frame size: garbage on the wire."""


class FrameDecoder:
    __slots__ = ("_chunks", "_buffered", "_need", "max_size")

    def __init__(self, max_size: int) -> None:
        self._chunks: list[bytes | memoryview] = []
        self._buffered = 0
        self._need = -1  # size of the frame being assembled, -1 while the prefix is incomplete
        self.max_size = max_size

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def frame_size(self) -> int:
        """The declared size of the frame being received; -1 between frames."""
        return self._need

    def reset(self) -> None:
        """Drop whatever is buffered (the connection is closing)."""
        self._chunks.clear()
        self._buffered = 0
        self._need = -1

    def feed(self, data: bytes) -> list[bytearray]:
        """Add received bytes; return every complete frame body (without its size prefix)."""
        self._chunks.append(data)
        self._buffered += len(data)
        frames: list[bytearray] = []
        while True:
            if self._need < 0:
                if self._buffered < 4:
                    return frames
                head = self._peek(4)
                size = SIZE.unpack_from(head, 0)[0]
                if size <= 0:  # an empty frame has no request header: Kafka closes the connection too
                    raise InvalidFrame(f"frame size {size}")
                if size > self.max_size:
                    raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes={self.max_size}")
                self._need = size
                self._consume(4)
            if self._buffered < self._need:
                return frames
            frames.append(self._take(self._need))
            self._need = -1

    def _peek(self, n: int) -> bytes:
        first = self._chunks[0]
        if len(first) >= n:
            return bytes(first[:n])
        joined = b"".join(self._chunks)
        self._chunks = [joined]
        return joined[:n]

    def _consume(self, n: int) -> None:
        self._take(n)

    def _take(self, n: int) -> bytearray:
        """The next ``n`` bytes as one mutable buffer, copied exactly once: the broker patches
        offsets into produce payloads in place, so a frame must be writable anyway."""
        first = self._chunks[0]
        if len(first) >= n:
            frame = bytearray(memoryview(first)[:n])
            if len(first) == n:
                self._chunks.pop(0)
            else:
                self._chunks[0] = memoryview(first)[n:]
            self._buffered -= n
            return frame
        frame = bytearray(n)
        pos = 0
        while pos < n:
            chunk = self._chunks[0]
            take = min(len(chunk), n - pos)
            frame[pos:pos + take] = memoryview(chunk)[:take]
            pos += take
            if take == len(chunk):
                self._chunks.pop(0)
            else:
                self._chunks[0] = memoryview(chunk)[take:]
        self._buffered -= n
        return frame
