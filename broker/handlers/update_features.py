"""UpdateFeatures (key 57), v0-2: change finalized feature levels (``kafka-features.sh
upgrade/downgrade``), validated as Kafka 4.3.1's QuorumController/FeatureControlManager do
(broker.config.features): the whole request is applied or nothing is, and the first failing feature
(in Java HashMap order) fails it with a top-level INVALID_UPDATE_VERSION. v0-1 list a NONE result
per requested feature on success (none on failure), v2 only the top-level error. v0's
AllowDowngrade is ignored, as Kafka's is: every v0 update is an upgrade (the UpgradeType default).
``validate_only`` (v1+) checks without applying. The timeout is not used: the update is applied
(persisted with the cluster metadata) before the answer.
Authorization (ControllerApis.handleUpdateFeatures): ALTER on the cluster, else a top-level
CLUSTER_AUTHORIZATION_FAILED with the "needs ALTER permission" message and no results.
"""

from __future__ import annotations

from broker.config import features
from broker.handlers.describe_acls import cluster_denied
from broker.handlers.registry import api
from broker.net.context import RequestContext
from broker.security.checks import Operation, cluster_allowed
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiMessage, lazy_response

Response = lazy_response(57)


@api(57, (0, 2))
def handle(ctx: RequestContext, req: ApiMessage) -> ApiMessage:
    # ControllerApis.handleUpdateFeatures: ALTER on the cluster (UpdateFeaturesResponse.createWithErrors)
    if not cluster_allowed(ctx, Operation.ALTER):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=cluster_denied(ctx, Operation.ALTER), results=[])
    broker = ctx.broker
    updates = [(u.feature, u.max_version_level, u.upgrade_type if ctx.api_version >= 1 else features.UPGRADE)
               for u in req.feature_updates]
    validate_only = ctx.api_version >= 1 and req.validate_only
    try:
        levels = features.validate(broker.node_id, dict(broker.metadata.features), updates)
    except KafkaError as e:
        message = f"The update failed for all features since the following feature had an error: {e.message}"
        return Response(throttle_time_ms=0, error_code=e.code, error_message=message, results=[])
    if updates and not validate_only:
        features.apply(broker, levels)
    results = [] if ctx.api_version >= 2 else [
        Response.UpdatableFeatureResult(feature=name, error_code=ErrorCode.NONE, error_message="NONE")
        for name, _, _ in updates]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
