"""A byte range of a segment file, handed to the network layer instead of the bytes themselves.

Kafka answers a Fetch with ``FileRecords`` slices that the socket server sends with
``FileChannel.transferTo`` (sendfile): the records go from the page cache to the socket without
passing through the broker's memory. A ``FileRegion`` is that slice here. It holds its own
duplicate of the segment's file descriptor, so a segment deleted, compacted away or closed while
the region waits behind other responses still reads the bytes it was cut from.
"""

from __future__ import annotations

import os


class FileRegion:
    """``size`` bytes of a file from ``position``; ``read()`` copies them when no socket can take them."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = -1  # until the dup succeeds (EMFILE), so __del__ has nothing to close
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes (a short read means the file shrank under us: an error, never a short frame)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"file region of {self.size} bytes at {self.position} read {len(data)}")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, size={self.size})"
