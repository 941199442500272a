"""Repository-wide pytest configuration: registers the real test servers' fixtures
(``s3_server``, ``azurite_server``, ``webhdfs_server``, ``zookeeper_server``,
``server_factory``; see ``docs/testing.md``) and pytest's own ``pytester`` (pytest only accepts
``pytest_plugins`` in this top-level conftest). Kept light: nothing heavy is imported here."""

pytest_plugins = ["pytester", "tests.servers.fixtures"]
