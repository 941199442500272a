"""InitProducerId (key 22) v0-v5: a producer id and epoch for an idempotent producer.

- Without a transactional id: a producer id never given out before in the cluster
  (:mod:`kafka_tiers.kafka.producer_ids`) and epoch 0. As Kafka does, a v3+ request carrying
  its current producer id and epoch (KIP-360, after an OUT_OF_ORDER_SEQUENCE_NUMBER or
  INVALID_PRODUCER_EPOCH) also gets a new id at epoch 0: Kafka bumps epochs only for
  transactional ids.
- Authorization (Kafka's, KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
  (an ACL allowing it on any topic, literal or prefixed, that no DENY covers); else
  CLUSTER_AUTHORIZATION_FAILED.
- With a transactional id: refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (see
  :mod:`kafka_tiers.kafka.apis.transactions`); an empty one with INVALID_REQUEST, as Kafka.

v6 (two-phase commit, unstable in Kafka) is not served. Any broker answers (an idempotent
producer asks any broker, no coordinator is involved).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka.apis.transactions import (
    TRANSACTIONS_UNSUPPORTED,
    transactions_unsupported_message,
)
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.producer_ids import (
    ProducerIdManager,
    ProducerIdsExhaustedError,
    manager_for,
)
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import CLUSTER_AUTHORIZATION_FAILED, may_on_some

log = logging.getLogger(__name__)

#: the server component key of the producer id manager
COMPONENT = "producer_ids"
#: the answer while no block of ids can be claimed (store or disk failing): retriable, as
#: Kafka's answer while its next block is not there yet
COORDINATOR_LOAD_IN_PROGRESS = 14
INVALID_REQUEST = 42


@handles(22, 0, 5)
def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    """A new producer id at epoch 0, or the refusal of a transactional id."""
    if request.transactional_id == "":
        return _answer(ctx, INVALID_REQUEST, -1, -1)
    if request.transactional_id is not None:
        log.info("InitProducerId from %s: %s", ctx.peer,
                 transactions_unsupported_message(request.transactional_id))
        return _answer(ctx, TRANSACTIONS_UNSUPPORTED, -1, -1)
    if not ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME,
                         log_if_denied=False) \
            and not may_on_some(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)  # audit
        return _answer(ctx, CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    manager: ProducerIdManager = ctx.component(COMPONENT, lambda s: manager_for(s.broker))
    try:
        pid = manager.generate()
    except ProducerIdsExhaustedError as exc:
        log.error("InitProducerId from %s: no producer id: %s", ctx.peer, exc)
        return _answer(ctx, exc.kafka_error_code, -1, -1)
    except Exception as exc:  # the store or the disk failed: nothing was handed out
        log.warning("InitProducerId from %s: no producer id block could be claimed (%s: "
                    "%s); answered COORDINATOR_LOAD_IN_PROGRESS, the client retries",
                    ctx.peer, type(exc).__name__, exc)
        return _answer(ctx, COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    return _answer(ctx, 0, pid, 0)


def _answer(ctx: RequestContext, code: int, producer_id: int, epoch: int) -> Any:
    return ctx.response(throttle_time_ms=0, error_code=code, producer_id=producer_id,
                        producer_epoch=epoch)
