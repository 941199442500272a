"""The lifecycle every kafka-tiers plugin shares."""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from types import TracebackType
from typing import ClassVar, Self


# ABC so that subclasses' abstract methods are enforced; configure() and close() themselves are
# optional with documented no-op defaults, hence no abstract method here.
class Plugin(ABC):  # noqa: B024
    """Base of every plugin interface: ``configure(config)``, ``close()``, context manager.

    The core creates a plugin with no arguments, calls :meth:`configure` exactly once before any
    other method, and :meth:`close` exactly once when done (also after a failed ``configure``).

    Class attributes:
        SUPPORTED_SPI: a PEP 440 version specifier (``">=2.0,<3"``) naming the
            :data:`kafka_tiers.api.SPI_VERSION` range the plugin was written for. ``None`` (the
            default) means "any x.y of the current major". The core refuses a plugin whose
            range excludes its own SPI version, with a message naming the plugin and both
            versions.
        SECRET_KEYS: the configuration keys whose values are credentials (passwords, keys,
            tokens). The core hands their values to :meth:`configure` as
            :class:`~kafka_tiers.api.Secret` (``str`` for every other key), hides them from
            every log record and from the messages of the plugin's errors, and never shows
            them; the plugin calls ``reveal()`` only where it hands one to its client.
    """

    SUPPORTED_SPI: ClassVar[str | None] = None
    SECRET_KEYS: ClassVar[frozenset[str]] = frozenset()

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027
        """Receive the plugin's own settings.

        Args:
            config: string keys and string values, with the config prefix already stripped
                (``placer.seed=7`` in ``server.properties`` arrives as ``{"seed": "7"}``); the
                value of a key in :attr:`SECRET_KEYS` may arrive as a
                :class:`~kafka_tiers.api.Secret` (accept both: ``Secret.of(value)``).

        Raises:
            ConfigError: a value is missing or malformed; the error names the key, never the
                value of a secret.
        """

    def close(self) -> None:  # noqa: B027
        """Release every resource the plugin holds. Safe to call more than once."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["Plugin"]
