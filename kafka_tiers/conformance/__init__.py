"""Conformance suites that plugin authors run against their plugins.

Each suite is a package of pytest test modules shipped inside kafka-tiers, selected by a
command-line option of the ``kafka_tiers`` pytest plugin (:mod:`.pytest_plugin`):

=========  ====================  ===================================
kind       option                package
=========  ====================  ===================================
placer     ``--kt-placer``       ``kafka_tiers.conformance.placer``
storage    ``--kt-storage``      ``kafka_tiers.conformance.storage``
=========  ====================  ===================================

When a suite's option is given and pytest gets no test paths, the suite's package directory is
what runs. This module is imported by every pytest run (through the plugin), so it imports only
the standard library.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


class SuiteNotInstalledError(LookupError):
    """The package of a conformance suite is not part of this kafka-tiers installation.

    Attributes:
        kind: the suite asked for (``"placer"`` or ``"storage"``).
        package: the package that was looked for.
    """

    def __init__(self, kind: str, package: str) -> None:
        super().__init__(
            f"the {kind} conformance suite ({package}) is not installed in this kafka-tiers"
        )
        self.kind = kind
        self.package = package


@dataclass(frozen=True)
class Suite:
    """One conformance suite.

    Attributes:
        kind: its name on the command line (``kafka-tiers conformance <kind>``).
        option: the pytest option naming the plugin under test (its ``dest`` is derived from it).
        package: the dotted name of the package holding its test modules.
    """

    kind: str
    option: str
    package: str

    @property
    def dest(self) -> str:
        """The attribute name of :attr:`option` on ``config.option``."""
        return self.option.lstrip("-").replace("-", "_")

    def path(self) -> Path:
        """The directory of the suite's package, found without importing the package itself.

        Raises:
            SuiteNotInstalledError: the package does not exist.
        """
        try:
            spec = importlib.util.find_spec(self.package)
        except ModuleNotFoundError:
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise SuiteNotInstalledError(self.kind, self.package)
        return Path(next(iter(spec.submodule_search_locations)))


#: kind -> suite, in the order their summaries are printed.
SUITES: dict[str, Suite] = {
    "placer": Suite("placer", "--kt-placer", "kafka_tiers.conformance.placer"),
    "storage": Suite("storage", "--kt-storage", "kafka_tiers.conformance.storage"),
}


def suite_path(kind: str) -> Path:
    """The directory of the suite ``kind`` (a key of :data:`SUITES`).

    Raises:
        KeyError: no suite of that kind.
        SuiteNotInstalledError: the suite's package is missing.
    """
    return SUITES[kind].path()


__all__ = ["SUITES", "Suite", "SuiteNotInstalledError", "suite_path"]
