"""The one secret type. The core hands the values of a plugin's ``SECRET_KEYS`` over as
:class:`Secret` and keeps a live one out of every log record and plugin error message
(:meth:`Secret.hide`); the plugin calls :meth:`Secret.reveal` only to give it to its client."""

from __future__ import annotations

import hmac
import weakref
from collections.abc import Iterable
from typing import Any, NoReturn, final
from urllib.parse import quote, unquote

HIDDEN = "<hidden>"  #: what is shown in place of a secret
_LIVE: dict[int, weakref.ref[Secret]] = {}  # by identity; list(values()) is thread-safe


@final
class Secret:
    """A secret string. Contract:

    - ``repr``, ``str`` and ``format`` are ``<hidden>``, so f-strings, logging, exceptions,
      dataclass and container reprs and pytest's ``-l`` locals never show the value;
    - only :meth:`reveal` returns it; ``bool`` tells whether it is empty, nothing more;
    - ``==`` compares two secrets in constant time (never equal to a ``str``); hashable;
    - immutable, not subclassable, not a ``str`` (``+``, ``in``, ``len`` raise TypeError);
      ``copy``/``deepcopy`` return the same object;
    - cannot be pickled (TypeError); ``json.dumps`` refuses it (``default=str`` gives
      ``"<hidden>"``).

    Args: ``value``, the secret (a ``str``, else TypeError); ``parts``, substrings that are
    secrets on their own (a SAS's signature, a key inside a connection string), hidden too.
    """

    __slots__ = ("__weakref__", "_forms", "_value")
    _value: str
    _forms: tuple[str, ...]

    def __init__(self, value: str, *, parts: Iterable[str] = ()) -> None:
        texts = (value, *parts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("a Secret holds a str")
        # as given, percent-decoded and -encoded (in URLs), escaped as repr does (str, bytes)
        forms = {f for t in texts for f in (t, unquote(t), quote(t, safe=""), quote(t),
                                            repr(t)[1:-1], repr(t.encode())[2:-1])}
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_forms", tuple(f for f in forms if len(f) >= 3))
        key = id(self)
        _LIVE[key] = weakref.ref(self, lambda r: _LIVE.pop(key) if _LIVE.get(key) is r else None)

    def __init_subclass__(cls, **kwargs: Any) -> NoReturn:
        raise TypeError("Secret cannot be subclassed: a subclass could show the value")

    @classmethod
    def of(cls, value: str | Secret | None, *, parts: Iterable[str] = ()) -> Secret | None:
        """A ``str`` wrapped, a :class:`Secret` as it is, ``None`` as ``None``."""
        return value if value is None or isinstance(value, Secret) else cls(value, parts=parts)

    def reveal(self) -> str:
        """The value: call this only where it is handed to a client library."""
        return self._value

    def __format__(self, spec: str = "") -> str:
        return format(HIDDEN, spec)

    __repr__ = __str__ = __format__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return hmac.compare_digest(self._value.encode(), other._value.encode())
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __setattr__(self, name: str, value: object = None) -> NoReturn:
        raise AttributeError("a Secret is immutable")

    __delattr__ = __setattr__

    def __deepcopy__(self, memo: Any = None) -> Secret:
        return self

    __copy__ = __deepcopy__

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError("a Secret cannot be pickled: reveal() it where it must cross processes")

    @staticmethod
    def any_live() -> bool:
        """Whether any secret is alive (so :meth:`hide` may have something to replace)."""
        return bool(_LIVE)

    @staticmethod
    def hide(text: str, extra: Iterable[Secret] = ()) -> str:
        """``text`` with the value and parts of every live secret (and of ``extra``) replaced
        by ``<hidden>``: for text of foreign origin, such as an SDK's exception message."""
        live = [r() for r in list(_LIVE.values())]
        forms = {f for s in [*live, *extra] if s is not None for f in s._forms}
        for form in sorted(forms, key=lambda f: (-len(f), f)):  # longest first
            text = text.replace(form, HIDDEN)
        return text


__all__ = ["HIDDEN", "Secret"]
