"""Kafka request and response frames, through kafka-python's message classes (generated from
Kafka's own JSON message schemas; ``decode`` and ``encode`` serve both sides).

Request frame: ``int32 size | header | body``. The header is v1 (``api_key, api_version,
correlation_id, client_id``) for non-flexible versions and v2 (v1 plus tagged fields) for
flexible ones. A response is ``int32 size | correlation_id [| tagged fields] | body``; the
``ApiVersions`` response header is never flexible (Kafka's rule: a client that does not know
our versions yet must be able to read it).
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import struct
from dataclasses import dataclass
from typing import Any

import kafka.protocol as _kp
from kafka.protocol.api_message import ApiMessage

from kafka_tiers.kafka.request_counts import MalformedBody, count_elements
from kafka_tiers.kafka.request_counts import TooManyElements as _TooMany

API_VERSIONS_KEY = 18
_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


class FrameError(ValueError):
    """A request frame that cannot be read: the connection is closed (Kafka does the same)."""


class TooManyElements(FrameError):
    """A request whose arrays declare more elements in all than the server's bound (see
    :mod:`kafka_tiers.kafka.request_counts`): refused before it is decoded."""


@dataclass(frozen=True)
class RequestHeader:
    """The fields of a request header."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _message_classes() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    for info in pkgutil.walk_packages(_kp.__path__, _kp.__name__ + "."):
        if ".old" in info.name or info.name.endswith(("generate_stubs", "parser")):
            continue
        try:
            mod = importlib.import_module(info.name)
        except Exception:
            continue
        for value in vars(mod).values():
            if (isinstance(value, type) and issubclass(value, ApiMessage)
                    and value is not ApiMessage and getattr(value, "_json", None)
                    and getattr(value, "_class_version", None) is None):
                msg: Any = value
                key = msg.json.get("apiKey")
                if key is None:
                    continue
                (requests if msg.type == "request" else responses).setdefault(key, value)
    return requests, responses


REQUESTS, RESPONSES = _message_classes()


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request frame body (after the size).

    Raises:
        FrameError: fewer than 8 bytes.
    """
    if len(frame) < 8:
        raise FrameError(f"a request of {len(frame)} bytes has no header")
    key, version, corr = _HEAD.unpack_from(frame, 0)
    return key, version, corr


def decode_request(frame: bytes | bytearray | memoryview, api_key: int, api_version: int,
                   max_elements: int | None = None) -> tuple[RequestHeader, Any]:
    """Decode a whole request (header and body) of a supported key and version.

    Args:
        max_elements: when given, the body's arrays may declare at most this many elements
            in all, counted by a pre-pass that reads only lengths
            (:func:`kafka_tiers.kafka.request_counts.count_elements`) before anything is
            decoded.

    Raises:
        TooManyElements: the arrays declare more than ``max_elements`` elements.
        FrameError: the bytes do not decode as that request.
    """
    cls = REQUESTS[api_key]
    view = memoryview(frame)
    size = header_size(view, bool(cls.flexible_version_q(api_version)))
    if max_elements is not None:
        try:
            count_elements(view[size:], cls, api_version, max_elements)
        except _TooMany as exc:
            raise TooManyElements(f"{cls.__name__} v{api_version}: {exc}") from None
        except MalformedBody as exc:
            raise FrameError(f"{cls.__name__} v{api_version} does not decode: {exc}"
                             ) from None
    try:
        # the header is parsed from its own bytes and the body read in place: decoding the
        # whole frame with header=True copies it twice (a 1 MiB Produce costs ~1 ms more)
        hdr = cls.parse_header(io.BytesIO(bytes(view[:size])), version=api_version)
        msg = cls.decode(view[size:], version=api_version)
    except Exception as exc:
        raise FrameError(f"{cls.__name__} v{api_version} does not decode: "
                         f"{type(exc).__name__}: {exc}") from None
    msg.with_header(correlation_id=hdr.correlation_id, client_id=hdr.client_id)
    return RequestHeader(api_key, api_version, hdr.correlation_id,
                         getattr(hdr, "client_id", None)), msg


def header_size(frame: memoryview, flexible: bool) -> int:
    """The length of a request header (v1: key, version, correlation id, nullable client id;
    v2: v1 and a tagged-field section).

    Raises:
        FrameError: the header runs past the frame.
    """
    if len(frame) < 10:
        raise FrameError(f"a request of {len(frame)} bytes has no complete header")
    (client_len,) = _I16.unpack_from(frame, 8)
    pos = 10 + max(client_len, 0)
    if flexible:
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _uvarint(frame, pos)
            length, pos = _uvarint(frame, pos)
            pos += length
    if pos > len(frame):
        raise FrameError(f"the request header needs {pos} bytes, the frame has {len(frame)}")
    return pos


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise FrameError("a malformed varint in the request header")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def response_class(api_key: int, api_version: int) -> Any:
    """The response message class of an API at a version (``cls(...)`` builds a response)."""
    return RESPONSES[api_key][api_version]


def flexible(api_key: int, api_version: int) -> bool:
    """Whether a version of an API uses the flexible (compact, tagged) encoding."""
    return bool(RESPONSES[api_key].flexible_version_q(api_version))


def response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """The response header bytes: v0 (``correlation_id``), or v1 (plus an empty tagged-field
    section) for flexible versions except ``ApiVersions``."""
    head = struct.pack(">i", correlation_id)
    if api_key != API_VERSIONS_KEY and flexible(api_key, api_version):
        head += b"\x00"
    return head


def encode_response(response: Any, api_key: int, api_version: int, correlation_id: int
                    ) -> bytes:
    """Header and body of a response (without the size prefix)."""
    body = bytes(response.encode(version=api_version))
    return response_header(api_key, api_version, correlation_id) + body


__all__ = ["API_VERSIONS_KEY", "REQUESTS", "RESPONSES", "FrameError", "RequestHeader",
           "TooManyElements", "decode_request", "encode_response", "flexible", "header_size",
           "peek_header", "response_class", "response_header"]
