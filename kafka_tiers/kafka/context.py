"""What a Kafka API handler is given, and what it may answer.

A handler is ``fn(ctx: RequestContext, request) -> reply`` where ``request`` is the decoded
kafka-python message and ``reply`` is one of:

- a response message (an instance of ``codec.response_class(key, version)``): the server
  encodes it at the request's version with the right header;
- a :class:`RawBody`: body bytes and :class:`FileRegion` parts the handler encoded itself
  (Fetch: segment bytes go out with ``os.sendfile``);
- :data:`NO_RESPONSE`: nothing is sent (Produce with ``acks=0``);
- :data:`CLOSE_CONNECTION`: nothing is sent and the connection is closed, quietly (Produce
  with ``acks=0`` that failed: Kafka's only signal to such a client to refresh its metadata).

A handler answers every error it can name with Kafka's error code in its response. An
exception escaping it is logged once with the API name and the connection is closed (the
client reconnects), as Kafka does for a request it cannot process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_tiers.api.authorizer import (
    AclOperation,
    Action,
    KafkaPrincipal,
    RequestIdentity,
    ResourceType,
)
from kafka_tiers.kafka.codec import RequestHeader, response_class
from kafka_tiers.kafka.security.session import ConnectionSession

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker
    from kafka_tiers.kafka.server import KafkaServer

T = TypeVar("T")


@dataclass
class FileRegion:
    """``count`` bytes of an open file from ``offset``, sent with ``os.sendfile`` where the
    socket allows. The server closes ``fd`` once sent (or on failure): the handler hands over
    a descriptor of its own (e.g. ``os.open(path, O_RDONLY | O_NOFOLLOW)`` or ``os.dup``), so
    a segment closed or deleted meanwhile still reads the bytes checked for the response."""

    fd: int
    offset: int
    count: int

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        """Close ``fd``; idempotent (a second close must never close a descriptor the
        number was given to meanwhile)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class RawBody:
    """A response body encoded by the handler: bytes and file regions, in order."""

    parts: list[bytes | bytearray | memoryview | FileRegion] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def close(self) -> None:
        for p in self.parts:
            if isinstance(p, FileRegion):
                p.close()


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


#: the reply of a request that gets no response (Produce with acks=0)
NO_RESPONSE: Any = _NoResponse()


class _CloseConnection:
    def __repr__(self) -> str:
        return "CLOSE_CONNECTION"


#: the reply that closes the connection without an answer (a failed ``acks=0`` Produce)
CLOSE_CONNECTION: Any = _CloseConnection()


@dataclass
class RequestContext:
    """One request as a handler sees it.

    Attributes:
        server: the Kafka server (its broker, config and shared components).
        header: the request header (key, version, correlation id, client id).
        connection: the connection's security state (listener, principal, SASL exchange).
    """

    server: KafkaServer
    header: RequestHeader
    connection: ConnectionSession
    #: the request's denied actions to audit (one line, once the handler returned)
    denials: list[Action] = field(default_factory=list)

    @property
    def listener(self) -> str:
        """The listener name the request came in on (``PLAINTEXT``)."""
        return self.connection.listener

    @property
    def security_protocol(self) -> str:
        """That listener's security protocol."""
        return self.connection.security_protocol

    @property
    def peer(self) -> str:
        """``host:port`` of the client."""
        return self.connection.peer

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request (``User:ANONYMOUS`` when the listener authenticates
        nobody)."""
        return self.connection.principal

    def identity(self) -> RequestIdentity:
        """The request's principal and origin, as the authorizer sees them."""
        c = self.connection
        return RequestIdentity(c.principal, c.ip, c.listener, c.security_protocol,
                               self.header.client_id or "", self.header.api_key)

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_denied: bool = True) -> bool:
        """Whether the principal may perform ``operation`` on the resource (always True
        without an authorizer). A denial is audited unless ``log_if_denied`` is False."""
        return self.authorize_all([Action(operation, resource_type, name,
                                          log_if_denied=log_if_denied)])[0]

    def authorize_all(self, actions: Sequence[Action]) -> list[bool]:
        """:meth:`authorize` of several actions in one call to the authorizer."""
        if self.server.authorizer is None:  # every request allowed: nothing to build
            return [True] * len(actions)
        from kafka_tiers.kafka.security import authorization
        return authorization.check(self.server, self.identity(), actions, self.denials)

    def audit_denials(self) -> None:
        """The request's denials, audited in one line (once its handler returned); then
        none are left."""
        if self.denials:
            from kafka_tiers.kafka.security import authorization
            authorization.audit_denials(self.identity(), self.denials)
            self.denials = []

    @property
    def broker(self) -> Broker:
        """The broker (standalone, or a cluster member: ``broker.member``)."""
        return self.server.broker

    @property
    def config(self) -> Any:
        """The broker's configuration."""
        return self.server.broker.config

    @property
    def version(self) -> int:
        """The request's API version (the response is encoded at the same one)."""
        return self.header.api_version

    def response(self, **fields: Any) -> Any:
        """A response message of this request's API and version."""
        return response_class(self.header.api_key, self.header.api_version)(**fields)

    def component(self, key: str, factory: Callable[[KafkaServer], T]) -> T:
        """The server's shared component ``key`` (a group coordinator, a producer id
        manager, ...), made by ``factory(server)`` on first use; closed (``close()``) when
        the server stops."""
        return self.server.component(key, factory)


__all__ = ["CLOSE_CONNECTION", "NO_RESPONSE", "FileRegion", "RawBody", "RequestContext"]
