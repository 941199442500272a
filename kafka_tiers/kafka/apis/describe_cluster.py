"""DescribeCluster (key 60, v0-v2; KIP-700, KIP-919, KIP-1073): the cluster id, the active
controller and the live brokers as advertised on the listener the request came in on.

- v1 ``endpoint_type``: a broker answers only for brokers (1); asked for controllers (2) it
  answers ``MISMATCHED_ENDPOINT_TYPE`` as Kafka's brokers do (the controllers are brokers here,
  reached through the broker listener).
- v2 ``include_fenced_brokers``: only live brokers are registered, so none is fenced.
- ``include_cluster_authorized_operations``: the cluster operations the principal may
  perform (every one without an authorizer; none without DESCRIBE on the cluster). As Kafka,
  the rest of the answer needs no permission (Metadata tells the same).
"""

from __future__ import annotations

from typing import Any

from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import cluster_operations

#: Kafka's ``MISMATCHED_ENDPOINT_TYPE`` (KIP-919)
MISMATCHED_ENDPOINT_TYPE = 114
#: ``EndpointType.BROKER`` of the request's ``endpoint_type``
BROKER_ENDPOINT = 1


@handles(60, 0, 2)
def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    """The cluster as this broker reads it (see the module docstring). Never fails but for
    an endpoint type other than brokers."""
    version = ctx.version
    fields: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None}
    if version >= 1:
        fields["endpoint_type"] = BROKER_ENDPOINT
        asked = int(getattr(request, "endpoint_type", BROKER_ENDPOINT))
        if asked != BROKER_ENDPOINT:
            fields.update(error_code=MISMATCHED_ENDPOINT_TYPE,
                          error_message=f"endpoint type {asked} was asked of a broker "
                          "listener, which describes brokers (type 1) only")
            return ctx.response(**fields, cluster_id="", controller_id=-1, brokers=[],
                                authorized_operations=None)
    state = ClusterState(ctx.broker, ctx.listener)
    broker_cls = response_class(60, version).DescribeClusterBroker
    brokers = [broker_cls(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack,
                          **({"is_fenced": False} if version >= 2 else {}))
               for b in state.brokers()]
    ops = cluster_operations(ctx) if request.include_cluster_authorized_operations else None
    return ctx.response(**fields, cluster_id=state.cluster_id() or "",
                        controller_id=state.controller_id(), brokers=brokers,
                        authorized_operations=ops)


__all__ = ["describe_cluster"]
