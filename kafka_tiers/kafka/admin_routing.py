"""Where a Kafka admin request that changes topics runs, and the error codes its answers carry.

CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs change
the cluster's topics, which only the controller does. As Kafka 2.8+ does, any broker accepts
them:

- a standalone broker, or the active controller, handles the request itself;
- another cluster member forwards the request, unchanged (same API version, its client id
  prefixed with :data:`FORWARDED_CLIENT_PREFIX`), to the controller's Kafka listener of the
  same listener name, and answers with the controller's response;
- when no controller is known or reachable, or a forwarded request reaches a broker that is
  no longer the controller (never forwarded twice), every entry is answered
  ``NOT_CONTROLLER``: clients (librdkafka, kafka-python) refresh their metadata and retry.

Authorization happens on the broker the client sent the request to, with the client's
principal, before anything is forwarded: entries the principal may not change are answered
there and never reach the controller; when some entries were held back the request is
forwarded with the others only (:func:`forward_entries`) and the answers merged.

:func:`admin_error` gives the ``(code, message)`` of an exception raised while serving one
entry: :func:`kafka_tiers.kafka.errors.error_of`, plus the bound refusals of
:mod:`kafka_tiers.placement.limits` (which name their Kafka error).
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.context import RawBody, RequestContext
from kafka_tiers.kafka.errors import NOT_CONTROLLER, UNKNOWN_SERVER_ERROR, error_of
from kafka_tiers.placement.limits import LimitExceededError

#: the client id prefix of a request a broker forwarded to the controller
FORWARDED_CLIENT_PREFIX = "kafka-tiers-forwarded/"
_SIZE = struct.Struct(">i")


class NotControllerError(Exception):
    """This broker cannot run the request on the controller: answer ``NOT_CONTROLLER``."""

    kafka_error_code = NOT_CONTROLLER


def admin_error(exc: BaseException) -> tuple[int, str]:
    """``(Kafka error code, message)`` for an exception raised while serving one entry."""
    if isinstance(exc, LimitExceededError):
        try:
            return int(for_code_by_name(exc.error_code).errno), str(exc)
        except KeyError:
            return UNKNOWN_SERVER_ERROR, str(exc)
    return error_of(exc)


def for_code_by_name(name: str) -> Any:
    """kafka-python's error class of a Kafka error name (``INVALID_PARTITIONS``).

    Raises:
        KeyError: no such name.
    """
    import kafka.errors as ke

    for cls in vars(ke).values():
        if isinstance(cls, type) and issubclass(cls, ke.BrokerResponseError) and \
                getattr(cls, "message", None) == name:
            return cls
    raise KeyError(name)


def is_local(ctx: RequestContext) -> bool:
    """Whether this broker runs admin requests itself (standalone, or the active
    controller)."""
    member = ctx.broker.member
    if member is None:
        return True
    ctl = member.controller
    return ctl is not None and bool(ctl.active)


def forward_to_controller(ctx: RequestContext, request: Any, timeout_s: float) -> RawBody:
    """The controller's response body to ``request`` (see the module docstring), checked to
    decode, for the server to send under this connection's correlation id.

    Args:
        ctx: the request's context (its listener names the controller's endpoint).
        request: the decoded request (its header is rewritten for the forward).
        timeout_s: how long to wait for the answer.

    Raises:
        NotControllerError: no controller is known, it does not advertise this listener, it
            cannot be reached in time, or this request was forwarded already.
    """
    return RawBody([_forward(ctx, request, timeout_s)[0]])


def forward_entries(ctx: RequestContext, request: Any, timeout_s: float, entries: str,
                    kept: list[Any], results: str) -> list[Any]:
    """Forward ``request`` with only ``kept`` as its ``entries`` field (the entries this
    broker did not answer itself, e.g. those the principal may change) and return the
    controller's answers: the decoded response's ``results`` field, for the handler to merge
    with its own answers.

    Raises:
        NotControllerError: as :func:`forward_to_controller`.
    """
    setattr(request, entries, kept)
    return list(getattr(_forward(ctx, request, timeout_s)[1], results))


def _forward(ctx: RequestContext, request: Any, timeout_s: float) -> tuple[bytes, Any]:
    """The controller's response body (after its header) and the body decoded."""
    client_id = ctx.header.client_id or ""
    if client_id.startswith(FORWARDED_CLIENT_PREFIX):
        raise NotControllerError(f"broker {ctx.broker.broker_id} is not the controller (any "
                                 "more); refresh the metadata and retry")
    member = ctx.broker.member
    md = member.metadata if member is not None else None
    ctl = md.controller() if md is not None else None
    if md is None or ctl is None:
        raise NotControllerError("no controller is elected right now; retry")
    reg = md.live_brokers().get(ctl[0])
    endpoint = reg.endpoint(ctx.listener) if reg is not None else None
    if endpoint is None:
        raise NotControllerError(f"the controller (broker {ctl[0]}) has no {ctx.listener} "
                                 "listener registered; retry")
    key, version = ctx.header.api_key, ctx.header.api_version
    request.with_header(correlation_id=1, client_id=FORWARDED_CLIENT_PREFIX + client_id)
    frame = bytes(request.encode(version=version, header=True, framed=True))
    try:
        with _connect(ctx, endpoint, timeout_s) as sock:
            sock.sendall(frame)
            (size,) = _SIZE.unpack(_read(sock, 4))
            if size < 4 or size > int(ctx.config["socket.request.max.bytes"]):
                raise OSError(f"a response of {size} bytes")
            body = _read(sock, size)
    except OSError as exc:
        raise NotControllerError(f"the controller (broker {ctl[0]}) did not answer: "
                                 f"{exc}; retry") from None
    cls = codec.RESPONSES[key]
    try:  # the body is checked to decode, then passed on as the controller's bytes
        head = io.BytesIO(body)
        correlation = cls.parse_header(head, version=version).correlation_id
        decoded = cls.decode(body[head.tell():], version=version)
    except Exception as exc:
        raise NotControllerError(f"the controller's answer does not decode: {exc}") from None
    if correlation != 1:
        raise NotControllerError(f"the controller answered correlation id {correlation}, "
                                 "not 1")
    return body[head.tell():], decoded


def _connect(ctx: RequestContext, endpoint: tuple[str, int], timeout_s: float
             ) -> socket.socket:
    """A connection to the controller's listener of the request's name: TLS on an SSL
    listener, this broker presenting its own certificate (its principal there) and checking
    the controller's against the listener's truststore
    (``ssl.endpoint.identification.algorithm``, ``https`` by default: the name too)."""
    sock = socket.create_connection(endpoint, timeout=timeout_s)
    tls = ctx.server.tls.get(ctx.listener)
    if tls is None:
        return sock
    try:
        from kafka_tiers.kafka.security.config import listener_value

        algorithm = str(listener_value(ctx.config, ctx.listener,
                                       "ssl.endpoint.identification.algorithm", "https") or "")
        client = tls.client_context(check_hostname=algorithm.strip().lower() == "https")
        return client.wrap_socket(sock, server_hostname=endpoint[0])
    except ConfigError as exc:  # this broker's certificate cannot be loaded: never a secret
        sock.close()
        raise OSError(f"no TLS client context for listener {ctx.listener}: {exc}") from None
    except BaseException:
        sock.close()
        raise


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def request_timeout_s(ctx: RequestContext, timeout_ms: int | None) -> float:
    """How long to wait for the controller: the request's timeout (when positive) plus
    ``request.timeout.ms`` of slack, so the controller's own answer (perhaps a timeout)
    arrives first."""
    slack = int(ctx.config["request.timeout.ms"]) / 1000.0
    own = timeout_ms / 1000.0 if timeout_ms and timeout_ms > 0 else 0.0
    return own + slack


__all__ = ["FORWARDED_CLIENT_PREFIX", "NotControllerError", "admin_error",
           "for_code_by_name", "forward_entries", "forward_to_controller", "is_local",
           "request_timeout_s"]
