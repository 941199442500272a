"""Counts before cost: a pre-pass over a request body that reads only array and string
lengths, so a request carrying millions of elements is refused before it is decoded.

kafka-python's decoder builds a Python object per array element: a 10 MB Metadata request
of 5 million empty topic names costs tens of seconds of CPU and gigabytes of memory before a
handler can check ``max.request.topics``. :func:`count_elements` walks the same bytes with
the library's own field definitions (the message class's schema, generated from Kafka's
JSON), skipping fixed-size fields, strings and byte fields (a Produce's records are one
bytes field: skipped whole), and adds up the elements every array declares. It stops, with
:class:`TooManyElements`, as soon as the running total passes the bound, so the walk itself
costs at most ``limit`` element steps however large the frame.

The encoding rules mirrored are kafka-python's (which are Kafka's): non-flexible versions use
``int16`` string and ``int32`` bytes/array lengths (``-1``: null); flexible versions use
unsigned varint lengths plus one (``0``: null) and end each struct with a tagged-field
section (tagged values are walked with their field definition, unknown tags skipped; each
value's declared size says where the next one starts); a
nested struct with ``nullableVersions`` starts with an ``int8`` marker (``-1``: null).
A negative array length other than null is read as empty, as the decoder does.

The walk is a bound, not a validator: a body that runs past its end raises
:class:`MalformedBody` (the full decode would fail too); trailing bytes are ignored, as the
decoder ignores them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafka.protocol.schemas.fields.codecs.types import Bytes, String

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: one compiled step: ``step(buf, pos, state) -> pos``; ``state`` is ``[total, limit]``
_Step = Callable[[memoryview, int, list[int]], int]


class MalformedBody(ValueError):
    """The body runs past its end (or holds an impossible length) where the schema says a
    length or a field is."""


class TooManyElements(ValueError):
    """The arrays of a request declare more elements in all than the bound.

    Attributes:
        counted: the total reached when the walk stopped (above ``limit``).
        limit: the bound.
    """

    def __init__(self, counted: int, limit: int) -> None:
        super().__init__(f"its arrays declare at least {counted} elements, above the bound "
                         f"of {limit}")
        self.counted = counted
        self.limit = limit


def count_elements(body: memoryview | bytes | bytearray, message_class: Any, version: int,
                   limit: int) -> int:
    """The number of array elements a request body declares, walking at most ``limit``.

    Args:
        body: the request body (after the request header).
        message_class: the kafka-python request class (``codec.REQUESTS[key]``).
        version: the request's API version.
        limit: the largest total accepted.

    Returns:
        The total of every array's declared length (nested arrays counted per element).

    Raises:
        TooManyElements: the total passed ``limit`` (the walk stopped there).
        MalformedBody: a length or a field runs past the end of ``body``.
    """
    step = _plan(message_class, version)
    state = [0, limit]
    view = body if isinstance(body, memoryview) else memoryview(body)
    try:
        step(view, 0, state)
    except (IndexError, struct.error) as exc:
        raise MalformedBody(f"a length runs past the end of the body ({exc})") from None
    return state[0]


_PLANS: dict[tuple[int, int], _Step] = {}


def _plan(message_class: Any, version: int) -> _Step:
    key = (id(message_class), version)
    step = _PLANS.get(key)
    if step is None:
        flexible = bool(message_class.flexible_version_q(version))
        step = _struct_step(message_class._struct, version, flexible, flexible, top=True)
        _PLANS[key] = step
    return step


# ---------------------------------------------------------------------- the compiled steps

def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedBody("a varint longer than 5 bytes")


def _check_end(buf: memoryview, pos: int) -> int:
    if pos > len(buf):
        raise MalformedBody(f"a field ends at byte {pos}, past the body's {len(buf)}")
    return pos


def _length_reader(compact: bool, wide: bool) -> Callable[[memoryview, int],
                                                          tuple[int, int]]:
    """Reads a length: ``(n, pos)`` with ``n < 0`` for null."""
    if compact:
        def read_compact(buf: memoryview, pos: int) -> tuple[int, int]:
            n, pos = _uvarint(buf, pos)
            return n - 1, pos
        return read_compact
    fmt = _I32 if wide else _I16
    size = fmt.size

    def read_fixed(buf: memoryview, pos: int) -> tuple[int, int]:
        return fmt.unpack_from(buf, pos)[0], pos + size
    return read_fixed


def _simple_step(field: Any, compact: bool) -> tuple[int | None, _Step | None]:
    """``(fixed size, None)`` for a fixed-size field, ``(None, step)`` otherwise."""
    codec = field._type
    size = getattr(codec, "size", None)
    if isinstance(size, int):
        return size, None
    if isinstance(codec, String) or codec is Bytes:
        read = _length_reader(compact, wide=codec is Bytes)

        def skip(buf: memoryview, pos: int, state: list[int]) -> int:
            n, pos = read(buf, pos)
            return _check_end(buf, pos + max(n, 0))
        return None, skip
    raise TypeError(f"no pre-pass rule for field {field.name} of type {field.type_str}")


def _array_step(field: Any, version: int, compact: bool, tagged: bool | None) -> _Step:
    read = _length_reader(compact, wide=True)
    inner = field.array_of
    if field.is_struct_array():
        elem = _struct_step(inner, version, compact, tagged, top=False)
        fixed = None
    else:
        fixed, elem_step = _simple_step(inner, compact)
        elem = elem_step  # type: ignore[assignment]

    def walk(buf: memoryview, pos: int, state: list[int]) -> int:
        n, pos = read(buf, pos)
        if n <= 0:
            return pos
        state[0] += n
        if state[0] > state[1]:
            raise TooManyElements(state[0], state[1])
        if fixed is not None:
            return _check_end(buf, pos + n * fixed)
        for _ in range(n):
            pos = elem(buf, pos, state)
        return pos
    return walk


def _field_step(field: Any, version: int, compact: bool, tagged: bool | None
                ) -> tuple[int | None, _Step | None]:
    if field.is_array():
        return None, _array_step(field, version, compact, tagged)
    if field.is_struct():
        return None, _struct_step(field, version, compact, tagged, top=False)
    return _simple_step(field, compact)


def _struct_step(field: Any, version: int, compact: bool, tagged: bool | None, *, top: bool
                 ) -> _Step:
    steps: list[_Step] = []
    run = 0  # adjacent fixed-size fields are skipped together

    def flush() -> None:
        nonlocal run
        if run:
            n = run
            steps.append(lambda buf, pos, state: _check_end(buf, pos + n))
            run = 0

    for sub in field.untagged_fields(version):
        fixed, step = _field_step(sub, version, compact, tagged)
        if fixed is not None:
            run += fixed
        else:
            flush()
            steps.append(step)  # type: ignore[arg-type]
    flush()
    if tagged:
        tags = {f.tag: _field_step(f, version, True, None)
                for f in field.tagged_fields(version)._fields}
        steps.append(_tagged_step(tags))
    elif tagged is None:  # a tagged value's struct: an empty tagged section, one byte
        steps.append(lambda buf, pos, state: _check_end(buf, pos + 1))
    nullable = not top and field.nullable_for_version_q(version)
    body = _sequence(steps)
    if not nullable:
        return body

    def maybe_null(buf: memoryview, pos: int, state: list[int]) -> int:
        marker = buf[pos]
        if marker == 0xFF:
            return pos + 1
        return body(buf, pos + 1, state)
    return maybe_null


def _sequence(steps: list[_Step]) -> _Step:
    if len(steps) == 1:
        return steps[0]
    steps_t = tuple(steps)

    def walk(buf: memoryview, pos: int, state: list[int]) -> int:
        for step in steps_t:
            pos = step(buf, pos, state)
        return pos
    return walk


def _tagged_step(tags: dict[int, tuple[int | None, _Step | None]]) -> _Step:
    def walk(buf: memoryview, pos: int, state: list[int]) -> int:
        count, pos = _uvarint(buf, pos)
        if count:  # each tagged value counts as an element (the decoder keeps each one)
            state[0] += count
            if state[0] > state[1]:
                raise TooManyElements(state[0], state[1])
        for _ in range(count):
            tag, pos = _uvarint(buf, pos)
            size, pos = _uvarint(buf, pos)
            end = _check_end(buf, pos + size)
            step = tags.get(tag, (None, None))[1]
            if step is not None:  # counted; the declared size says where the next one is
                step(buf, pos, state)
            pos = end
        return pos
    return walk


__all__ = ["MalformedBody", "TooManyElements", "count_elements"]
