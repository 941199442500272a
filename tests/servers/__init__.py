"""Real test servers started from the project's own files.

Each server runs as a child process bound to 127.0.0.1 on a free port, is waited for until it
answers, and is always stopped (its whole process group) and its temporary directory removed:

- :mod:`tests.servers.moto_s3`: moto's S3 server over HTTP (boto3 with ``endpoint_url``);
- :mod:`tests.servers.azurite`: Azurite's blob service from npm (installed on first use);
- :mod:`tests.servers.webhdfs`: a WebHDFS REST emulator (stdlib only) following the public spec;
- :mod:`tests.servers.zookeeper`: a real ZooKeeper from Debian's package (installed on first use).

The session-scoped pytest fixtures live in :mod:`tests.servers.fixtures`, registered for the
whole repository by the root ``conftest.py``. See ``docs/testing.md``.
"""
