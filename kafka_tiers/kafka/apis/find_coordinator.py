"""FindCoordinator (key 10) v0-v6: where a group's coordinator is.

key_type 0 (group): the leader of partition ``abs(hash(group id)) % n`` of
``__consumer_offsets`` as advertised on the request's listener; the internal topic is created
on first need (see :mod:`kafka_tiers.kafka.groups.coordinator`). v4+ batches keys
(``coordinator_keys``), each answered on its own. key_type 2 (share group) is refused with
INVALID_REQUEST: share groups are not served. key_type 1 (transaction) is refused as
:mod:`kafka_tiers.kafka.apis.transactions` says (TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the
one code clients treat as fatal at once, with our message).

A group key needs DESCRIBE on the group (else ``GROUP_AUTHORIZATION_FAILED`` and no node), as
Kafka's ``getCoordinator``.
"""

from __future__ import annotations

from typing import Any

from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka.apis.groups import text
from kafka_tiers.kafka.apis.transactions import (
    TRANSACTIONS_UNSUPPORTED,
    transactions_unsupported_message,
)
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.groups.coordinator import Coordinator, coordinator_of
from kafka_tiers.kafka.groups.errors import INVALID_REQUEST, NONE, GroupError
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import GROUP_AUTHORIZATION_FAILED

FIND_COORDINATOR_KEY = 10
GROUP_KEY_TYPE = 0


def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, Coordinator]:
    none = Coordinator(-1, "", -1)
    if key_type == 1:
        return TRANSACTIONS_UNSUPPORTED, transactions_unsupported_message(key), none
    if key_type != GROUP_KEY_TYPE:
        what = {1: "transactions", 2: "share groups"}.get(key_type, f"key type {key_type}")
        return INVALID_REQUEST, (f"FindCoordinator for {what} (key_type={key_type}, key "
                                 f"{key!r}): kafka-tiers serves consumer groups only "
                                 "(key_type 0)"), none
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return GROUP_AUTHORIZATION_FAILED, (f"{ctx.principal} may not describe group {key!r} "
                                            "(DESCRIBE on the group is needed)"), none
    try:
        return NONE, None, coordinator_of(ctx).find(key, ctx.listener)
    except GroupError as exc:
        return exc.kafka_error_code, str(exc), none


@handles(FIND_COORDINATOR_KEY, 0, 6)
def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    """Answer each key (v0-3: the one ``key``; v4+: every ``coordinator_keys`` entry)."""
    v = ctx.version
    key_type = int(request.key_type) if v >= 1 else GROUP_KEY_TYPE
    if v < 4:
        error, message, c = _find(ctx, text(request.key), key_type)
        fields: dict[str, Any] = {"error_code": error, "node_id": c.node_id, "host": c.host,
                                  "port": c.port}
        if v >= 1:
            fields.update(throttle_time_ms=0, error_message=message)
        return ctx.response(**fields)
    cls = response_class(FIND_COORDINATOR_KEY, v)
    entries = []
    for key in map(text, request.coordinator_keys or []):
        error, message, c = _find(ctx, key, key_type)
        entries.append(cls.Coordinator(key=key, node_id=c.node_id, host=c.host, port=c.port,
                                       error_code=error, error_message=message))
    return ctx.response(throttle_time_ms=0, coordinators=entries)
