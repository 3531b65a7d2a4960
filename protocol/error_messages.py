"""The default message of each Kafka error (``Errors.X.message()`` in Apache Kafka 4.3.1, read from
kafka-clients-4.3.1.jar): the text Kafka puts in ``error_message`` where an answer carries the
error's own description (FindCoordinator, DescribeConfigs)."""

from __future__ import annotations

from protocol.errors import ErrorCode

DEFAULT_MESSAGES: dict[int, str] = {
    -1: 'The server experienced an unexpected error when processing the request.',  # UNKNOWN_SERVER_ERROR
    0: 'NONE',  # NONE
    1: 'The requested offset is not within the range of offsets maintained by the server.',  # OFFSET_OUT_OF_RANGE
    2: 'This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.',  # CORRUPT_MESSAGE
    3: 'This server does not host this topic-partition.',  # UNKNOWN_TOPIC_OR_PARTITION
    4: 'The requested fetch size is invalid.',  # INVALID_FETCH_SIZE
    5: 'There is no leader for this topic-partition as we are in the middle of a leadership election.',  # LEADER_NOT_AVAILABLE
    6: 'For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.',  # NOT_LEADER_OR_FOLLOWER
    7: 'The request timed out.',  # REQUEST_TIMED_OUT
    8: 'The broker is not available.',  # BROKER_NOT_AVAILABLE
    9: 'The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.',  # REPLICA_NOT_AVAILABLE
    10: 'The request included a message larger than the max message size the server will accept.',  # MESSAGE_TOO_LARGE
    11: 'The controller moved to another broker.',  # STALE_CONTROLLER_EPOCH
    12: 'The metadata field of the offset request was too large.',  # OFFSET_METADATA_TOO_LARGE
    13: 'The server disconnected before a response was received.',  # NETWORK_EXCEPTION
    14: "The coordinator is loading and hence can't process requests.",  # COORDINATOR_LOAD_IN_PROGRESS
    15: 'The coordinator is not available.',  # COORDINATOR_NOT_AVAILABLE
    16: 'This is not the correct coordinator.',  # NOT_COORDINATOR
    17: 'The request attempted to perform an operation on an invalid topic.',  # INVALID_TOPIC_EXCEPTION
    18: 'The request included message batch larger than the configured segment size on the server.',  # RECORD_LIST_TOO_LARGE
    19: 'Messages are rejected since there are fewer in-sync replicas than required.',  # NOT_ENOUGH_REPLICAS
    20: 'Messages are written to the log, but to fewer in-sync replicas than required.',  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    21: 'Produce request specified an invalid value for required acks.',  # INVALID_REQUIRED_ACKS
    22: 'Specified group generation id is not valid.',  # ILLEGAL_GENERATION
    23: "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",  # INCONSISTENT_GROUP_PROTOCOL
    24: 'The group id is invalid.',  # INVALID_GROUP_ID
    25: 'The coordinator is not aware of this member.',  # UNKNOWN_MEMBER_ID
    26: 'The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).',  # INVALID_SESSION_TIMEOUT
    27: 'The group is rebalancing, so a rejoin is needed.',  # REBALANCE_IN_PROGRESS
    28: 'The committing offset data size is not valid.',  # INVALID_COMMIT_OFFSET_SIZE
    29: 'Topic authorization failed.',  # TOPIC_AUTHORIZATION_FAILED
    30: 'Group authorization failed.',  # GROUP_AUTHORIZATION_FAILED
    31: 'Cluster authorization failed.',  # CLUSTER_AUTHORIZATION_FAILED
    32: 'The timestamp of the message is out of acceptable range.',  # INVALID_TIMESTAMP
    33: 'The broker does not support the requested SASL mechanism.',  # UNSUPPORTED_SASL_MECHANISM
    34: 'Request is not valid given the current SASL state.',  # ILLEGAL_SASL_STATE
    35: 'The version of API is not supported.',  # UNSUPPORTED_VERSION
    36: 'Topic with this name already exists.',  # TOPIC_ALREADY_EXISTS
    37: 'Number of partitions is below 1.',  # INVALID_PARTITIONS
    38: 'Replication factor is below 1 or larger than the number of available brokers.',  # INVALID_REPLICATION_FACTOR
    39: 'Replica assignment is invalid.',  # INVALID_REPLICA_ASSIGNMENT
    40: 'Configuration is invalid.',  # INVALID_CONFIG
    41: 'This is not the correct controller for this cluster.',  # NOT_CONTROLLER
    42: 'This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.',  # INVALID_REQUEST
    43: 'The message format version on the broker does not support the request.',  # UNSUPPORTED_FOR_MESSAGE_FORMAT
    44: 'Request parameters do not satisfy the configured policy.',  # POLICY_VIOLATION
    45: 'The broker received an out of order sequence number.',  # OUT_OF_ORDER_SEQUENCE_NUMBER
    46: 'The broker received a duplicate sequence number.',  # DUPLICATE_SEQUENCE_NUMBER
    47: 'Producer attempted to produce with an old epoch.',  # INVALID_PRODUCER_EPOCH
    48: 'The producer attempted a transactional operation in an invalid state.',  # INVALID_TXN_STATE
    49: 'The producer attempted to use a producer id which is not currently assigned to its transactional id.',  # INVALID_PRODUCER_ID_MAPPING
    50: 'The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).',  # INVALID_TRANSACTION_TIMEOUT
    51: 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.',  # CONCURRENT_TRANSACTIONS
    52: 'Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.',  # TRANSACTION_COORDINATOR_FENCED
    53: 'Transactional Id authorization failed.',  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    54: 'Security features are disabled.',  # SECURITY_DISABLED
    55: 'The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.',  # OPERATION_NOT_ATTEMPTED
    56: 'Disk error when trying to access log file on the disk.',  # KAFKA_STORAGE_ERROR
    57: 'The user-specified log directory is not found in the broker config.',  # LOG_DIR_NOT_FOUND
    58: 'SASL Authentication failed.',  # SASL_AUTHENTICATION_FAILED
    59: "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.",  # UNKNOWN_PRODUCER_ID
    60: 'A partition reassignment is in progress.',  # REASSIGNMENT_IN_PROGRESS
    61: 'Delegation Token feature is not enabled.',  # DELEGATION_TOKEN_AUTH_DISABLED
    62: 'Delegation Token is not found on server.',  # DELEGATION_TOKEN_NOT_FOUND
    63: 'Specified Principal is not valid Owner/Renewer.',  # DELEGATION_TOKEN_OWNER_MISMATCH
    64: 'Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.',  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    65: 'Delegation Token authorization failed.',  # DELEGATION_TOKEN_AUTHORIZATION_FAILED
    66: 'Delegation Token is expired.',  # DELEGATION_TOKEN_EXPIRED
    67: 'Supplied principalType is not supported.',  # INVALID_PRINCIPAL_TYPE
    68: 'The group is not empty.',  # NON_EMPTY_GROUP
    69: 'The group id does not exist.',  # GROUP_ID_NOT_FOUND
    70: 'The fetch session ID was not found.',  # FETCH_SESSION_ID_NOT_FOUND
    71: 'The fetch session epoch is invalid.',  # INVALID_FETCH_SESSION_EPOCH
    72: 'There is no listener on the leader broker that matches the listener on which metadata request was processed.',  # LISTENER_NOT_FOUND
    73: 'Topic deletion is disabled.',  # TOPIC_DELETION_DISABLED
    74: 'The leader epoch in the request is older than the epoch on the broker.',  # FENCED_LEADER_EPOCH
    75: 'The leader epoch in the request is newer than the epoch on the broker.',  # UNKNOWN_LEADER_EPOCH
    76: 'The requesting client does not support the compression type of given partition.',  # UNSUPPORTED_COMPRESSION_TYPE
    77: 'Broker epoch has changed.',  # STALE_BROKER_EPOCH
    78: 'The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.',  # OFFSET_NOT_AVAILABLE
    79: 'The group member needs to have a valid member id before actually entering a consumer group.',  # MEMBER_ID_REQUIRED
    80: 'The preferred leader was not available.',  # PREFERRED_LEADER_NOT_AVAILABLE
    81: 'The group has reached its maximum size.',  # GROUP_MAX_SIZE_REACHED
    82: 'The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.',  # FENCED_INSTANCE_ID
    83: 'Eligible topic partition leaders are not available.',  # ELIGIBLE_LEADERS_NOT_AVAILABLE
    84: 'Leader election not needed for topic partition.',  # ELECTION_NOT_NEEDED
    85: 'No partition reassignment is in progress.',  # NO_REASSIGNMENT_IN_PROGRESS
    86: 'Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.',  # GROUP_SUBSCRIBED_TO_TOPIC
    87: 'This record has failed the validation on broker and hence will be rejected.',  # INVALID_RECORD
    88: 'There are unstable offsets that need to be cleared.',  # UNSTABLE_OFFSET_COMMIT
    89: 'The throttling quota has been exceeded.',  # THROTTLING_QUOTA_EXCEEDED
    90: 'There is a newer producer with the same transactionalId which fences the current one.',  # PRODUCER_FENCED
    91: 'A request illegally referred to a resource that does not exist.',  # RESOURCE_NOT_FOUND
    92: 'A request illegally referred to the same resource twice.',  # DUPLICATE_RESOURCE
    93: 'Requested credential would not meet criteria for acceptability.',  # UNACCEPTABLE_CREDENTIAL
    94: 'Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.',  # INCONSISTENT_VOTER_SET
    95: 'The given update version was invalid.',  # INVALID_UPDATE_VERSION
    96: 'Unable to update finalized features due to an unexpected server error.',  # FEATURE_UPDATE_FAILED
    97: 'Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.',  # PRINCIPAL_DESERIALIZATION_FAILURE
    98: 'Requested snapshot was not found.',  # SNAPSHOT_NOT_FOUND
    99: 'Requested position is not greater than or equal to zero, and less than the size of the snapshot.',  # POSITION_OUT_OF_RANGE
    100: 'This server does not host this topic ID.',  # UNKNOWN_TOPIC_ID
    101: 'This broker ID is already in use.',  # DUPLICATE_BROKER_REGISTRATION
    102: 'The given broker ID was not registered.',  # BROKER_ID_NOT_REGISTERED
    103: "The log's topic ID did not match the topic ID in the request.",  # INCONSISTENT_TOPIC_ID
    104: 'The clusterId in the request does not match that found on the server.',  # INCONSISTENT_CLUSTER_ID
    105: 'The transactionalId could not be found.',  # TRANSACTIONAL_ID_NOT_FOUND
    106: 'The fetch session encountered inconsistent topic ID usage.',  # FETCH_SESSION_TOPIC_ID_ERROR
    107: 'The new ISR contains at least one ineligible replica.',  # INELIGIBLE_REPLICA
    108: 'The AlterPartition request successfully updated the partition state but the leader has changed.',  # NEW_LEADER_ELECTED
    109: 'The requested offset is moved to tiered storage.',  # OFFSET_MOVED_TO_TIERED_STORAGE
    110: 'The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.',  # FENCED_MEMBER_EPOCH
    111: 'The instance ID is still used by another member in the consumer group. That member must leave first.',  # UNRELEASED_INSTANCE_ID
    112: 'The assignor or its version range is not supported by the consumer group.',  # UNSUPPORTED_ASSIGNOR
    113: 'The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.',  # STALE_MEMBER_EPOCH
    114: 'The request was sent to an endpoint of the wrong type.',  # MISMATCHED_ENDPOINT_TYPE
    115: 'This endpoint type is not supported yet.',  # UNSUPPORTED_ENDPOINT_TYPE
    116: 'This controller ID is not known.',  # UNKNOWN_CONTROLLER_ID
    117: 'Client sent a push telemetry request with an invalid or outdated subscription ID.',  # UNKNOWN_SUBSCRIPTION_ID
    118: 'Client sent a push telemetry request larger than the maximum size the broker will accept.',  # TELEMETRY_TOO_LARGE
    119: 'The controller has considered the broker registration to be invalid.',  # INVALID_REGISTRATION
    120: 'The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.',  # TRANSACTION_ABORTABLE
    121: 'The record state is invalid. The acknowledgement of delivery could not be completed.',  # INVALID_RECORD_STATE
    122: 'The share session was not found.',  # SHARE_SESSION_NOT_FOUND
    123: 'The share session epoch is invalid.',  # INVALID_SHARE_SESSION_EPOCH
    124: 'The share coordinator rejected the request because the share-group state epoch did not match.',  # FENCED_STATE_EPOCH
    125: "The voter key doesn't match the receiving replica's key.",  # INVALID_VOTER_KEY
    126: 'The voter is already part of the set of voters.',  # DUPLICATE_VOTER
    127: 'The voter is not part of the set of voters.',  # VOTER_NOT_FOUND
    128: 'The regular expression is not valid.',  # INVALID_REGULAR_EXPRESSION
    129: 'Client metadata is stale. The client should rebootstrap to obtain new metadata.',  # REBOOTSTRAP_REQUIRED
    130: 'The supplied topology is invalid.',  # STREAMS_INVALID_TOPOLOGY
    131: 'The supplied topology epoch is invalid.',  # STREAMS_INVALID_TOPOLOGY_EPOCH
    132: 'The supplied topology epoch is outdated.',  # STREAMS_TOPOLOGY_FENCED
    133: 'The limit of share sessions has been reached.',  # SHARE_SESSION_LIMIT_REACHED
}


def default_message(code: int) -> str:
    """Kafka's text for ``code`` (its name when Kafka has none recorded here)."""
    text = DEFAULT_MESSAGES.get(int(code))
    if text is not None:
        return text
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
