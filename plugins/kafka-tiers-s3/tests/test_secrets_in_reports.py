"""pytest's report of a failing run never shows the credentials, ``-l -vv`` locals included: the
S3 settings hold them as ``kafka_tiers.api.Secret``, and the ``kafka_tiers`` pytest plugin hides
them where boto3's own frames hold them revealed (signed headers, the request on the wire).

No server: the endpoint is a port nobody listens on, so every test of the run fails."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.servers.base import free_port

ACCESS_KEY_ID = "AKIAKTREPORTKEY3X9Q"
SECRET_ACCESS_KEY = "kt/rpt+SECRET-never-shown-5e6f7a8b"
SESSION_TOKEN = "kt-rpt-TOKEN-never-shown-1c2d3e4f"
SECRETS = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN)


def _leaked(output: str) -> list[str]:
    """Every 8-character piece of a credential found in ``output`` (pytest -vv splits long
    values over lines, so whole values are not enough to look for)."""
    return [s[i:i + 8] for s in SECRETS for i in range(len(s) - 7) if s[i:i + 8] in output]


def _settings(tmp_path: Path) -> Path:
    path = tmp_path / "s3.properties"
    path.write_text("\n".join([
        "s3.bucket.name=kt-report-bucket",
        f"s3.endpoint.url=http://127.0.0.1:{free_port()}",
        "s3.region=us-east-1",
        "s3.path.style.access.enabled=true",
        "s3.retry.max.attempts=1",
        f"aws.access.key.id={ACCESS_KEY_ID}",
        f"aws.secret.access.key={SECRET_ACCESS_KEY}",
        f"aws.session.token={SESSION_TOKEN}",
    ]) + "\n")
    return path


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env=_isolated_env())
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # the run failed, so the report was printed
    return output


def _isolated_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


def test_conformance_run_with_locals_shows_no_credential(tmp_path: Path) -> None:
    """``kafka-tiers conformance storage s3 -- -l -vv``: failures inside botocore's frames."""
    output = _run(["-m", "kafka_tiers", "conformance", "storage", "s3", "--config",
                   str(_settings(tmp_path)), "--", "-l", "-vv", "-x", "-p", "no:cacheprovider"],
                  tmp_path)
    assert "AWSHTTPConnection" in output and "headers" in output  # boto3's frames, with locals
    assert "<hidden>" in output
    assert _leaked(output) == []


_CONFORMANCE_LIKE = '''
import pytest

from kafka_tiers.config import read_properties
from kafka_tiers.conformance.storage.harness import StorageTarget
from kafka_tiers_s3.config import S3Config


@pytest.fixture
def target():
    return StorageTarget.from_plugin("s3", read_properties({path!r}))


def test_fails_before_any_call(target):
    settings = S3Config.from_mapping(target.config)
    store = target.create()
    assert settings.bucket == "another-bucket", (target, settings, store)
'''


def test_failing_test_holding_the_settings_shows_no_credential(tmp_path: Path) -> None:
    """A conformance-like test that holds the real S3 settings and fails before any call."""
    test = tmp_path / "test_conformance_like.py"
    test.write_text(textwrap.dedent(_CONFORMANCE_LIKE.format(path=str(_settings(tmp_path)))))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    output = _run(["-m", "pytest", str(test), "-l", "-vv", "-p", "no:cacheprovider"], tmp_path)
    assert "settings   = S3Config(bucket='kt-report-bucket'" in output  # locals were shown
    assert "AssertionError" in output and "<hidden>" in output
    assert _leaked(output) == []


def test_settings_repr_logs_and_errors_show_no_credential(
        caplog: pytest.LogCaptureFixture) -> None:
    from kafka_tiers_s3.config import S3Config

    from kafka_tiers.api import ConfigError, Secret

    given = {"s3.bucket.name": "b-1", "aws.access.key.id": ACCESS_KEY_ID,
             "aws.secret.access.key": SECRET_ACCESS_KEY, "aws.session.token": SESSION_TOKEN}
    settings = S3Config.from_mapping(given)
    assert all(isinstance(s, Secret) for s in settings.secrets) and len(settings.secrets) == 3
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kafka_tiers_s3.test").debug("settings %s %r %s", settings, settings,
                                                       settings.secrets)
    assert _leaked(repr(settings) + caplog.text) == [] and "<hidden>" in caplog.text
    no_secret_key = {k: v for k, v in given.items() if k != "aws.secret.access.key"}
    for config in ({**given, "aws.session.token": " "}, {**given, "aws.secret.access.key": ""},
                   no_secret_key, {**given, "aws.profile": "p"}):
        with pytest.raises(ConfigError) as info:
            S3Config.from_mapping(config)
        assert _leaked(str(info.value) + repr(info.value.args) + repr(info.value.value)) == []
