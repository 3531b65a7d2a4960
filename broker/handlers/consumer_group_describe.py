"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 consumer groups as their coordinator sees them.

Per group: its state (Empty, Assigning, Reconciling, Stable), group and assignment epochs, the
assignor in use, and each member's subscription, current and target assignment (topics by id
and name). An unknown group is GROUP_ID_NOT_FOUND "Group <id> not found.", a classic group
"Group <id> is not a consumer group.", an empty id INVALID_GROUP_ID; v1 adds MemberType (1, a
consumer-protocol member). Authorized operations, when asked for, are the group operations the
principal may do (all of them with no authorizer), as DescribeGroups answers them. With
``group.version`` 0 (UpdateFeatures) every group is UNSUPPORTED_VERSION, as Kafka's KafkaApis
answers while the consumer protocol is off.
Authorization (KafkaApis.handleConsumerGroupDescribe): DESCRIBE on each group (the refused ones
first, GROUP_AUTHORIZATION_FAILED); then, with an authorizer, DESCRIBE on every topic of the
members' assignments and target assignments: a group naming one the client may not describe is
replaced by a TOPIC_AUTHORIZATION_FAILED entry without members.
"""

from __future__ import annotations

from broker.config.features import GROUP_VERSION, level
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import (
    OPERATIONS_OMITTED,
    Operation,
    ResourceType,
    allowed,
    authorized_operations,
    filter_allowed,
)
from coordinator.group.consumer_group import Assignment as PartitionsByTopic
from coordinator.group.consumer_group import ConsumerGroupMember
from protocol.errors import ErrorCode
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(69)
Described = Response.DescribedGroup
Member = Described.Member
Assignment = Member.Assignment
NO_OPERATIONS = OPERATIONS_OMITTED
UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."
CONSUMER_MEMBER = 1


def _error(group_id: str, code: ErrorCode, message: str | None) -> ApiMessage:
    return Described(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                     assignment_epoch=0, assignor_name="", members=[], authorized_operations=NO_OPERATIONS)


def _owned(member: ConsumerGroupMember) -> PartitionsByTopic:
    """What the member still owns: its assignment and the partitions it is revoking."""
    owned = dict(member.assigned)
    for t, ps in member.pending_revocation.items():
        owned[t] = owned.get(t, frozenset()) | ps
    return owned


@api(69, (0, 1))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    if level(ctx.broker, GROUP_VERSION) < 1:
        return Response(throttle_time_ms=0, groups=[_error(g, ErrorCode.UNSUPPORTED_VERSION, None)
                                                    for g in req.group_ids])
    # KafkaApis.handleConsumerGroupDescribe: DESCRIBE on each group, the refused ones first
    out: list[ApiMessage] = []
    group_ids: list[str] = []
    for gid in req.group_ids:
        if allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, gid):
            group_ids.append(gid)
        else:
            out.append(_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
    gc = ctx.broker.group_coordinator
    if not gc.active:
        return Response(throttle_time_ms=0, groups=out + [
            _error(g, ErrorCode.COORDINATOR_NOT_AVAILABLE, None) for g in group_ids])
    manager = gc.manager
    consumer = manager.consumer

    def assignment(parts: PartitionsByTopic) -> ApiMessage:
        return Assignment(topic_partitions=[
            Assignment.TopicPartitions(topic_id=t, topic_name=consumer.topic_name(t), partitions=sorted(ps))
            for t, ps in sorted(parts.items(), key=lambda i: str(i[0]))
        ])

    for gid in group_ids:
        if not gid:
            out.append(_error(gid, ErrorCode.INVALID_GROUP_ID, None))
            continue
        if (error := gc.check(gid)) != ErrorCode.NONE:  # another broker coordinates it
            out.append(_error(gid, error, None))
            continue
        group = consumer.groups.get(gid)
        if group is None:
            message = f"Group {gid} is not a consumer group." if gid in manager.groups else f"Group {gid} not found."
            out.append(_error(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        out.append(Described(
            error_code=ErrorCode.NONE, error_message=None, group_id=gid, group_state=group.state,
            group_epoch=group.group_epoch, assignment_epoch=max(group.assignment_epoch, 0),
            assignor_name=consumer.assignor_name(group.members.values()),
            members=[
                Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                       member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                       subscribed_topic_names=list(m.subscribed_topic_names),
                       subscribed_topic_regex=m.subscribed_topic_regex or "",
                       assignment=assignment(_owned(m)), target_assignment=assignment(group.target.get(m.member_id, {})),
                       member_type=CONSUMER_MEMBER)
                for m in group.members.values()
            ],
            authorized_operations=authorized_operations(ctx, ResourceType.GROUP, gid)
            if req.include_authorized_operations else NO_OPERATIONS,
        ))
    if ctx.broker.authorizer is not None:  # then DESCRIBE on the topics the described members are assigned
        out = _without_undescribable_topics(ctx, out)
    return Response(throttle_time_ms=0, groups=out)


def _without_undescribable_topics(ctx: RequestContext, groups: list[ApiMessage]) -> list[ApiMessage]:
    """Each group whose members' assignment or target assignment names a topic the client may not
    DESCRIBE becomes TOPIC_AUTHORIZATION_FAILED, without members (its authorized operations omitted).
    Topics without a name (deleted ones) are not described, as Kafka leaves them out."""

    def names(group: ApiMessage) -> set[str]:
        return {t.topic_name for m in group.members for a in (m.assignment, m.target_assignment)
                for t in a.topic_partitions if t.topic_name}

    describable = filter_allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC,
                                 {name for g in groups for name in names(g)})
    return [Described(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=UNDESCRIBABLE_TOPICS,
                      group_id=g.group_id, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                      members=[], authorized_operations=NO_OPERATIONS)
            if not names(g) <= describable else g for g in groups]
