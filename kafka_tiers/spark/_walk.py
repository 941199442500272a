"""The record walk compiled with numba: one pass over the joined records sections of some
batches, writing the integers the Arrow decoder needs (offset and timestamp deltas, byte
positions of keys, values and headers) into preallocated arrays.

Used by :mod:`kafka_tiers.spark.arrow` when numba is installed (the ``spark`` extra installs
it); without numba the decoder walks in Python and numpy, with the same results. Errors are
returned as negative codes, never raised inside compiled code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from numba import njit
    AVAILABLE = True
except ImportError:  # pragma: no cover - the spark extra installs numba
    AVAILABLE = False

#: error codes of :func:`walk` (the record index is reported beside them)
E_COUNT = -1        # a batch holds fewer records than it declares
E_LENGTH = -2       # a record's length overruns its batch, or is negative
E_FIELDS = -3       # a record's fields do not take exactly its length
E_TRAILING = -4     # bytes left after a batch's declared records
E_HEADER = -5       # a negative header count or a null header key
E_VARINT = -6       # a varint longer than 10 bytes

MESSAGES = {
    E_COUNT: "a batch holds fewer records than it declares",
    E_LENGTH: "a record's length overruns its batch",
    E_FIELDS: "a record's fields do not take exactly its declared length",
    E_TRAILING: "bytes are left after a batch's declared records",
    E_HEADER: "a record has a negative header count or a null header key",
    E_VARINT: "a varint is longer than 10 bytes",
}


if AVAILABLE:
    @njit(cache=True, nogil=True, inline="always")
    def _varint(buf: Any, p: int) -> tuple[Any, int, bool]:  # np.int64, inside numba
        b = np.int64(buf[p])
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), p + 1, True
        result = b & 0x7F
        shift = 7
        p += 1
        while True:
            b = np.int64(buf[p])
            p += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), p, True
            shift += 7
            if shift > 63:
                return 0, p, False

    @njit(cache=True, nogil=True)
    def walk(buf: Any, ends: Any, counts: Any, off: Any, ts: Any, bounds: Any, knull: Any,
             vnull: Any, hcount: Any, hpos: Any) -> tuple[int, int]:
        """Walk every record; returns (records or error code, record index)."""
        i = 0
        p = 0
        for s in range(len(ends)):
            end = ends[s]
            for _r in range(counts[s]):
                if p >= end:
                    return E_COUNT, i
                length, p, ok = _varint(buf, p)
                if not ok:
                    return E_VARINT, i
                start = p
                if length < 0 or start + length > end:
                    return E_LENGTH, i
                stop = start + length  # every field must end by here
                p += 1  # attributes
                tsd, p, ok = _varint(buf, p)
                od, p, ok2 = _varint(buf, p)
                kl, p, ok3 = _varint(buf, p)
                if not (ok and ok2 and ok3):
                    return E_VARINT, i
                if p > stop:
                    return E_FIELDS, i
                bounds[i, 0] = p
                if kl >= 0:
                    p += kl
                    if p > stop:
                        return E_FIELDS, i
                    knull[i] = False
                else:
                    knull[i] = True
                bounds[i, 1] = p
                vl, p, ok = _varint(buf, p)
                if not ok:
                    return E_VARINT, i
                if p > stop:
                    return E_FIELDS, i
                bounds[i, 2] = p
                if vl >= 0:
                    p += vl
                    if p > stop:
                        return E_FIELDS, i
                    vnull[i] = False
                else:
                    vnull[i] = True
                bounds[i, 3] = p
                hc, p, ok = _varint(buf, p)
                if not ok:
                    return E_VARINT, i
                if hc < 0:
                    return E_HEADER, i
                if p > stop:
                    return E_FIELDS, i
                hpos[i] = p
                hcount[i] = hc
                for _h in range(hc):
                    hk, p, ok = _varint(buf, p)
                    if not ok:
                        return E_VARINT, i
                    if hk < 0:
                        return E_HEADER, i
                    p += hk
                    if p > stop:
                        return E_FIELDS, i
                    hv, p, ok = _varint(buf, p)
                    if not ok:
                        return E_VARINT, i
                    if hv > 0:
                        p += hv
                    if p > stop:
                        return E_FIELDS, i
                if p != stop:
                    return E_FIELDS, i
                off[i] = od
                ts[i] = tsd
                i += 1
            if p != end:
                return E_TRAILING, i
        return i, i

    @njit(cache=True, nogil=True)
    def walk_headers(buf: Any, hpos: Any, hcount: Any, first: Any, hbounds: Any,
                     hnull: Any) -> None:
        """Fill the bounds of every header (records already validated by ``walk``)."""
        for i in range(len(hcount)):
            p = hpos[i]
            slot = first[i]
            for _h in range(hcount[i]):
                hk, p, _ok = _varint(buf, p)
                hbounds[slot, 0] = p
                p += hk
                hbounds[slot, 1] = p
                hv, p, _ok = _varint(buf, p)
                hbounds[slot, 2] = p
                if hv >= 0:
                    p += hv
                    hnull[slot] = False
                else:
                    hnull[slot] = True
                hbounds[slot, 3] = p
                slot += 1

else:  # pragma: no cover - the spark extra installs numba
    # the callers check AVAILABLE first; without numba there is no compiled walk
    walk = None  # type: ignore[assignment]  # typed as the numba dispatcher above
    walk_headers = None  # type: ignore[assignment]  # typed as the numba dispatcher above

__all__ = ["AVAILABLE", "MESSAGES", "walk", "walk_headers"]
