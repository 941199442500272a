"""The security audit log (``kafka_tiers.audit``): a client's text is escaped and truncated
before it reaches a line, a request's denials make one line at most, lines are rate limited
per principal and client address (never per name the client chose), and the limiter's
memory is bounded whatever the client sends."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.apis import sasl as sasl_api
from kafka_tiers.kafka.security import authorization
from kafka_tiers.kafka.security.audit import OVERFLOW, AuditLimiter, shown, shown_list
from tests.kafka.raw_requests import RawConnection
from tests.security.test_authorization import TableAuthorizer
from tests.security.test_sasl import PLAIN_JAAS, RawClient

AUDIT = "kafka_tiers.audit"
ZERO = uuid.UUID(int=0)


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT]


# ---------------------------------------------------------------------- the rules, alone
def test_shown_escapes_non_printables_and_truncates() -> None:
    assert shown("orders") == "orders"
    assert shown("evil\nFAKE\r\x1b[31m\\") == "evil\\x0aFAKE\\x0d\\x1b[31m\\\\"
    assert shown("a\u2028b\U000e0001") == "a\\u2028b\\U000e0001"
    assert shown(b"bytes\x00") == "bytes\\x00"
    long = "x" * 250
    assert shown(long) == "x" * 200 + "…(50 more)"
    assert shown("ab\n", limit=2) == "ab…(1 more)"
    listed = shown_list([f"topic-{i}" for i in range(1000)], limit=100)
    assert len(listed) < 130 and listed.endswith("more)") and "\n" not in listed


def test_the_limiter_is_bounded_and_rate_limits_per_key() -> None:
    limiter = AuditLimiter(per_second=2, max_keys=8)
    admitted = [limiter.admit((f"User:u{i}", "10.0.0.1")) for i in range(10_000)]
    assert len(limiter) <= 9  # the table and the aggregate key
    lines = [a for a in admitted if a is not None]
    assert len(lines) == 8 + 2  # 8 keys, then 2 lines a second of the aggregate key
    assert {k for k, _ in lines[8:]} == {OVERFLOW}
    same = AuditLimiter(per_second=2)
    results = [same.admit(("User:a", "10.0.0.2")) for _ in range(5)]
    assert results[:2] == [(("User:a", "10.0.0.2"), 0)] * 2 and results[2:] == [None] * 3
    same._table[("User:a", "10.0.0.2")][0] -= 1.0  # a second later
    assert same.admit(("User:a", "10.0.0.2")) == (("User:a", "10.0.0.2"), 3)


# ---------------------------------------------------------------------- denials, end to end
@pytest.fixture
def denying_broker(make_kafka_broker: Callable[..., Broker]) -> Iterator[Broker]:
    """A PLAINTEXT broker whose authorizer denies everything (principal User:ANONYMOUS), the
    denials' limiter fresh."""
    broker = make_kafka_broker()
    assert broker.kafka_server is not None
    broker.kafka_server.authorizer = TableAuthorizer()
    authorization._audit_limiter.clear()
    yield broker
    broker.kafka_server.authorizer = None


def test_many_distinct_names_hold_one_key_and_make_one_line_per_request(
        denying_broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """The reviewer's flood: Metadata naming 1000 long topic names, 5 times. Before, every
    name was a key of the limiter (10,000 keys, megabytes of names) and a line each."""
    with caplog.at_level(logging.INFO, logger=AUDIT), \
            RawConnection(denying_broker.bootstrap_servers, timeout=15) as conn:
        for i in range(5):
            conn.call(3, 12, topics=[(ZERO, f"{i}-{j}-" + "x" * 300) for j in range(1000)],
                      allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
        assert len(authorization._audit_limiter) == 1
        lines = audit_lines(caplog)
        assert len(lines) == 1, len(lines)
        assert lines[0].startswith("denied: principal=User:ANONYMOUS client=127.0.0.1 ")
        assert "operation=DESCRIBE resource=TOPIC:0-0-xxx" in lines[0]
        assert "(1000 denials)" in lines[0] and len(lines[0]) < 2000, len(lines[0])
        time.sleep(1.05)  # the next second: a line again, saying how many were not logged
        conn.call(3, 12, topics=[(ZERO, "late")], allow_auto_topic_creation=False,
                  include_topic_authorized_operations=False)
    lines = audit_lines(caplog)
    assert len(lines) == 2 and "resource=TOPIC:late" in lines[1], lines[1:]
    assert "(and 4 more denied requests since the last line)" in lines[1]
    assert len(authorization._audit_limiter) == 1


def test_a_newline_in_a_topic_name_stays_on_one_line(
        denying_broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    evil = "evil\nFAKE: denied nothing principal=User:admin"
    with caplog.at_level(logging.INFO, logger=AUDIT), \
            RawConnection(denying_broker.bootstrap_servers, timeout=15) as conn:
        conn.call(2, 7, replica_id=-1, isolation_level=0, topics=[(evil, [(0, -1, -1, 1)])])
    lines = audit_lines(caplog)
    assert len(lines) == 1, lines
    assert "\n" not in lines[0] and "\r" not in lines[0]
    assert "resource=TOPIC:evil\\x0aFAKE: denied nothing" in lines[0]


# ---------------------------------------------------------------------- failed logins
def test_the_failed_login_line_escapes_and_truncates_the_user_name(
        make_kafka_broker: Callable[..., Broker], caplog: pytest.LogCaptureFixture) -> None:
    broker = make_kafka_broker(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    sasl_api._failures.clear()
    user = "mallory\nfailed authentication: principal=User:admin" + "y" * 300
    caplog.set_level(logging.INFO, logger=AUDIT)
    client = RawClient(broker.bootstrap_servers)
    try:
        assert client.plain(user, "wrong").error_code == sasl_api.SASL_AUTHENTICATION_FAILED
    finally:
        client.close()
    lines = [line for line in audit_lines(caplog) if line.startswith("failed authentication")]
    assert len(lines) == 1, lines
    assert "\n" not in lines[0] and "wrong" not in lines[0].split("reason=")[0]
    assert "principal=User:mallory\\x0afailed authentication: principal=User:admin" in lines[0]
    assert f"…({len(user) - 200} more)" in lines[0]


def test_a_group_id_with_a_newline_stays_on_one_log_line(
        make_kafka_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Group and member ids are the client's text: the coordinator's log lines escape them
    (a group id carrying a newline cannot forge a second line)."""
    from tests.kafka.group_requests import RawMember, find_coordinator

    broker = make_kafka_broker(**{"group.initial.rebalance.delay.ms": "0"})
    broker.create_topic("t", 1)
    evil = "g\nFAKE: group admin deleted"
    caplog.set_level(logging.INFO, logger="kafka_tiers.kafka.groups.coordinator")
    with RawConnection(broker.bootstrap_servers) as conn:
        assert find_coordinator(conn, evil).error_code == 0
    member = RawMember(broker.bootstrap_servers, evil)
    try:
        member.join_once()
        assert member.join_once().error_code == 0
    finally:
        member.close()
    lines = [r.getMessage() for r in caplog.records
             if r.name == "kafka_tiers.kafka.groups.coordinator"]
    assert any("g\\x0aFAKE" in line for line in lines), lines
    assert not any("\n" in line for line in lines)
