"""Hypothesis strategies shared by the codec tests: Kafka-shaped values, edge cases first."""

from __future__ import annotations

from hypothesis import strategies as st

int8 = st.integers(-(2**7), 2**7 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

# Topic names and ids: empty, ASCII, and non-ASCII (multi-byte UTF-8) text.
names = st.one_of(
    st.just(""),
    st.text(alphabet="abcxyz._-0123456789", min_size=1, max_size=20),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
)
nullable_names = st.none() | names
# Long enough to need a two-byte uvarint length (> 126 bytes) now and then.
long_names = st.text(alphabet="ab€", min_size=100, max_size=200)
any_names = names | long_names

uuids = st.uuids()
records = st.none() | st.binary(max_size=300)
# Some above INLINE_RECORDS_MAX, so the fetch encoder's no-copy path is exercised.
big_records = st.none() | st.binary(max_size=300) | st.binary(min_size=1025, max_size=3000)


def small_lists(elements, max_size=4):
    """Mostly short lists, including empty ones."""
    return st.lists(elements, max_size=max_size)


def non_default_pair(first=int32, second=int32):
    """A 2-field tagged struct that is not all-defaults (-1, -1), or None (absent)."""
    return st.none() | st.tuples(first, second).filter(lambda pair: pair != (-1, -1))
