"""Classic group states and the table of legal previous states (Kafka's ClassicGroupState).

A transition is legal only from one of the listed previous states; anything else is a bug and
raises, exactly as ``ClassicGroup.assertValidTransition`` does.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        return VALID_PREVIOUS_STATES[self]


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# Group has no more members but its metadata is kept until offsets expire; it can rebalance
# (first member joins), move on after a rebalance, or be removed (Dead).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    EMPTY: frozenset({PREPARING_REBALANCE}),
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A transition the state table forbids: a coordinator bug, never a client error."""
