"""A byte range of a segment file, handed to the network layer instead of the bytes themselves.

Kafka answers a Fetch with ``FileRecords`` slices that the socket server sends with
``FileChannel.transferTo`` (sendfile): the records go from the page cache to the socket without
passing through the broker's memory. A ``FileRegion`` is that slice here. It shares the segment's
file descriptor (``SharedFd``: closed when the segment and every region cut from it are done), so
a segment deleted, compacted away or closed while the region waits behind other responses still
reads the bytes it was cut from, and no Fetch, however many partitions it names, costs a
descriptor per partition.
"""

from __future__ import annotations

import os


class SharedFd:
    """A descriptor closed when its last holder releases it (the segment holds the first claim)."""

    __slots__ = ("fd", "refs")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.refs = 1

    def acquire(self) -> SharedFd:
        self.refs += 1
        return self

    def release(self) -> None:
        self.refs -= 1
        if self.refs == 0 and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class FileRegion:
    """``size`` bytes of a file from ``position``; ``read()`` copies them when no socket can take them."""

    __slots__ = ("fd", "position", "size", "_owner")

    def __init__(self, fd: int | SharedFd, position: int, size: int) -> None:
        self.fd = -1  # until the descriptor is held, so __del__ has nothing to close
        self._owner: SharedFd | None = None
        if isinstance(fd, SharedFd):
            self._owner = fd.acquire()
            self.fd = fd.fd
        else:
            self.fd = os.dup(fd)  # a plain descriptor: a duplicate of our own
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
            if self._owner is not None:
                self._owner.release()
                self._owner = None
            else:
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, size={self.size})"
