"""Admin APIs through stock admin clients: topics, partitions, configs, cluster."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_create_describe_delete_topic(broker, topic_name):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 4, 1, config={"retention.ms": "3600000"})])[topic_name].result(15)
    md = admin.list_topics(timeout=10)
    assert topic_name in md.topics and len(md.topics[topic_name].partitions) == 4
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].is_default
    admin.delete_topics([topic_name])[topic_name].result(15)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_validate_only_creates_nothing(broker, topic_name):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True)[topic_name].result(15)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_replication_factor_above_one_is_accepted(broker, topic_name):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 1, 3)])[topic_name].result(15)
    p = admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions[0]
    assert p.replicas == [1] and p.isrs == [1]


def test_create_partitions(broker, topic_name):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
    admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(15)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 5
    fut = admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name]
    try:
        fut.result(15)
        raise AssertionError("shrinking partitions must fail")
    except Exception as e:  # noqa: BLE001
        assert "INVALID_PARTITIONS" in str(e)


def test_incremental_alter_configs(broker, topic_name):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    admin.incremental_alter_configs([res])[res].result(15)
    d = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = admin.describe_configs([d])[d].result(15)
    assert configs["retention.bytes"].value == "1048576"
    assert configs["cleanup.policy"].value == "delete,compact"
    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([res])[res].result(15)
    configs = admin.describe_configs([d])[d].result(15)
    assert configs["retention.bytes"].value == "-1"


def test_broker_configs_and_cluster(broker):
    admin = _admin(broker)
    res = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["num.partitions"].value == "1"
    assert configs["message.max.bytes"].value == "1048588"
    cluster = admin.describe_cluster(request_timeout=10).result(15)
    assert cluster.controller.id == 1 and [n.id for n in cluster.nodes] == [1]
    assert cluster.cluster_id


def test_kafka_python_admin(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KpNewTopic(topic_name, 3, 1)])
        assert topic_name in admin.list_topics()
        desc = admin.describe_topics([topic_name])
        assert len(desc[0]["partitions"]) == 3
        admin.delete_topics([topic_name])
        assert topic_name not in admin.list_topics()
    finally:
        admin.close()


def test_topic_metadata_survives_restart(fresh_broker, topic_name):
    b = fresh_broker.start()
    admin = _admin(b)
    admin.create_topics([NewTopic(topic_name, 3, 1, config={"retention.ms": "123456"})])[topic_name].result(15)
    before = admin.list_topics(topic_name, timeout=10)
    del admin
    assert b.stop() == 0
    b.start()
    admin = _admin(b)
    after = admin.list_topics(topic_name, timeout=10)
    assert len(after.topics[topic_name].partitions) == 3
    assert after.cluster_id == before.cluster_id
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    assert admin.describe_configs([res])[res].result(15)["retention.ms"].value == "123456"


def test_delete_records_moves_low_watermark(broker, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    admin = _admin(broker)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    for i in range(100):
        p.produce(topic_name, value=str(i).encode())
    p.flush(10)
    result = admin.delete_records([TopicPartition(topic_name, 0, 40)])
    deleted = list(result.values())[0].result(15)
    assert deleted.low_watermark == 40
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-" + topic_name})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (40, 100)
    finally:
        c.close()


def test_kafka_python_alter_configs_and_log_dirs(broker, topic_name):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KpNewTopic(topic_name, 2, 1)])
        admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name,
                                              configs={"retention.ms": "7200000"})])
        d = ConfigResource(ResourceType.TOPIC, topic_name)
        ck = _admin(broker)  # must outlive its futures
        configs = ck.describe_configs([d])[d].result(15)
        assert configs["retention.ms"].value == "7200000"
        dirs = admin.describe_log_dirs()
        assert topic_name in repr(dirs), dirs
    finally:
        admin.close()


def test_acl_apis_report_security_disabled(broker, topic_name):
    """No authorizer, as in a default Kafka: the ACL admin calls fail with SECURITY_DISABLED (librdkafka
    reports DescribeAcls' top-level error as an empty list; kafka-python raises it)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError

    admin = _admin(broker)
    binding = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    acl_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(acl_filter).result(15) == []
    for call in (lambda: admin.create_acls([binding])[binding].result(15),
                 lambda: admin.delete_acls([acl_filter])[acl_filter].result(15)):
        try:
            call()
            raise AssertionError("an ACL call succeeded without an authorizer")
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.SECURITY_DISABLED, e
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                   permission_type=ACLPermissionType.ANY,
                                   resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                          ACLResourcePatternType.ANY)))
        raise AssertionError("describe_acls succeeded without an authorizer")
    except SecurityDisabledError as e:
        assert "No Authorizer is configured" in str(e)
    finally:
        kp.close()
