"""``kafka-tiers conformance``: run a conformance suite against a plugin, in-process with pytest.

The exit status is pytest's: 0 every rule holds, 1 some rule is broken (the report names it),
2 interrupted, 3 internal error, 4 usage error, 5 no test ran. A plugin that cannot be found,
imported or configured is one ``error:`` line and exit status 2, before pytest starts.
"""

from __future__ import annotations

import os

import click


def require_pytest() -> None:
    """Check that pytest, the suites' runner, can be imported.

    Raises:
        click.ClickException: it cannot (a broken install: pytest is a dependency of
            kafka-tiers), with the install hint.
    """
    try:
        import pytest  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"the conformance suites run on pytest, which cannot be imported ({exc}): "
            "pip install 'pytest>=8'") from None


@click.group()
def conformance() -> None:
    """Run the conformance suite against a placer or storage plugin.

    \b
    Examples:
      kafka-tiers conformance placer rack-aware
      kafka-tiers conformance placer my_pkg.placers:MyPlacer --config zone.key=az -- -x -k balance
      kafka-tiers conformance storage s3 --config s3.properties --set s3.bucket.name=test
    """
    require_pytest()


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    from kafka_tiers.conformance.pytest_plugin import parse_pairs

    try:
        return parse_pairs(list(values), option)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def run_pytest(args: list[str]) -> int:
    """Run pytest in this process with ``args`` and return its exit status. The ``kafka_tiers``
    pytest plugin is added explicitly when plugin autoloading is disabled."""
    import pytest

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args = ["-p", "kafka_tiers.conformance.pytest_plugin", *args]
    return int(pytest.main(args))


def _suite_dir(kind: str) -> str:
    from kafka_tiers.api.errors import PluginError
    from kafka_tiers.conformance import SuiteNotInstalledError, suite_path

    try:
        return str(suite_path(kind))
    except SuiteNotInstalledError as exc:
        raise PluginError(str(exc), cause="suite not installed") from None


@conformance.command("placer", context_settings={"ignore_unknown_options": True})
@click.argument("name_or_path")
@click.option("--config", "-c", "config", multiple=True, metavar="K=V",
              help="A configuration key for the placer (repeatable). The suite adds `seed` "
                   "unless given.")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def placer(ctx: click.Context, name_or_path: str, config: tuple[str, ...],
           pytest_args: tuple[str, ...]) -> None:
    """Run the replica placer suite against NAME_OR_PATH (an entry-point name in group
    kafka_tiers.replica_placer, or pkg.module:Class). Arguments after `--` go to pytest.

    \b
    Examples:
      kafka-tiers conformance placer multi-level-rack
      kafka-tiers conformance placer example-spread --config seed=7
      kafka-tiers conformance placer my_pkg.placers:MyPlacer -- -x -k "balance or errors"
    """
    from kafka_tiers.conformance.placer.base import DEFAULT_SEED
    from kafka_tiers.plugins import load_placer

    pairs = _pairs(config, "--config")
    suite = _suite_dir("placer")
    # Fail fast, as one error line: the placer must load and accept its configuration.
    with load_placer(name_or_path, {"seed": str(DEFAULT_SEED), **pairs}):
        pass
    args = [suite, "--kt-placer", name_or_path]
    for key, value in pairs.items():
        args.append(f"--kt-placer-config={key}={value}")
    ctx.exit(run_pytest([*args, *pytest_args]))


@conformance.command("storage", context_settings={"ignore_unknown_options": True})
@click.argument("name_or_path", required=False)
@click.option("--config", "config_file", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help="A broker's server.properties (rsm.config.* keys), or a file of the "
                   "storage plugin's own keys.")
@click.option("--set", "overrides", multiple=True, metavar="K=V",
              help="A configuration key overriding the file (repeatable).")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def storage(ctx: click.Context, name_or_path: str | None, config_file: str,
            overrides: tuple[str, ...], pytest_args: tuple[str, ...]) -> None:
    """Run the remote storage suite against NAME_OR_PATH (an entry-point name in group
    kafka_tiers.remote_storage or kafka_tiers.object_store, or pkg.module:Class of a storage
    manager or an object store). Arguments after `--` go to pytest.

    The config FILE is a broker's server.properties (its rsm.config.* keys; NAME_OR_PATH may
    then be left out, the plugin being its remote.storage.manager.class) or a file of the
    plugin's own keys.

    \b
    Examples:
      kafka-tiers conformance storage local --config local.properties
      kafka-tiers conformance storage s3 --config s3.properties --set s3.bucket.name=test -- -x
      kafka-tiers conformance storage --config /etc/kafka/server.properties -- -x
    """
    from kafka_tiers.plugins import STORAGE_GROUP, resolve_class
    from kafka_tiers.remote.storage_config import storage_settings

    if name_or_path is not None and name_or_path.startswith("-"):
        # no plugin named: the first argument is pytest's (names never start with "-")
        pytest_args = (name_or_path, *pytest_args)
        name_or_path = None
    settings = storage_settings(name_or_path, config_file, _pairs(overrides, "--set"),
                                storage_option="NAME_OR_PATH")
    suite = _suite_dir("storage")
    resolve_class(STORAGE_GROUP, settings.plugin)  # fail fast on a plugin that does not load
    args = [suite, "--kt-storage", settings.plugin, "--kt-storage-config", config_file]
    for item in overrides:
        args += ["--kt-storage-set", item]
    ctx.exit(run_pytest([*args, *pytest_args]))


__all__ = ["conformance", "require_pytest", "run_pytest"]
