"""Authorized operations with no authorizer: Kafka reports every operation the resource type supports
(``AclEntry.supportedOperations``), which is what Admin.describeCluster / describeTopics /
describeConsumerGroups show with ``includeAuthorizedOperations`` (librdkafka's 0081 test counts them)."""

from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest

from tests.differential.harness import build, unique
from tests.differential.test_group_offsets import _coordinator_ready


def test_cluster_and_topic_operations(pair, request):
    pair.require(request, (60, 1), (3, 10))
    topic = pair.create_topic(unique("ops"), 1)

    def scenario(t):
        with t.client() as c:
            cluster = c.send(build(DescribeClusterRequest, 1, include_cluster_authorized_operations=True,
                                   endpoint_type=1), 1)
            meta = c.send(build(MetadataRequest, 10, topics=[dict(topic_id=None, name=topic)],
                                allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                include_topic_authorized_operations=True), 10)
            return (cluster.error_code, sorted(cluster.authorized_operations),
                    sorted(meta.authorized_operations),
                    [(x.name, sorted(x.authorized_operations)) for x in meta.topics])

    k, o = pair.run(scenario)
    assert k[1] == [5, 7, 8, 9, 10, 11, 12]  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, *_CONFIGS, IDEMPOTENT_WRITE
    assert o == k


def test_group_operations(pair, request):
    pair.require(request, (15, 5), (8, 9))
    topic = pair.create_topic(unique("ops"), 1)
    group = unique("ops-group")

    def scenario(t):
        with t.client() as c:
            _coordinator_ready(c, group)
            commit = c.send(build(OffsetCommitRequest, 9, group_id=group, generation_id_or_member_epoch=-1,
                                  member_id="", group_instance_id=None, topics=[dict(name=topic, partitions=[
                                      dict(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                           committed_metadata="")])]), 9)
            assert commit.topics[0].partitions[0].error_code == 0
            r = c.send(build(DescribeGroupsRequest, 5, groups=[group], include_authorized_operations=True), 5)
            (g,) = r.groups
            return g.error_code, g.group_state, sorted(g.authorized_operations)

    k, o = pair.run(scenario)
    assert k == (0, "Empty", [3, 6, 8, 10, 11])  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert o == k
