"""The one secret type (``kafka_tiers.api.Secret``): it never shows itself, the core wraps the
declared secret keys in it, and while it lives its value reaches no log record, no error message
of the loader or the storage guard, and no pytest report (``-l -vv`` locals included)."""

from __future__ import annotations

import copy
import gc
import json
import logging
import pickle
import subprocess
import sys
import textwrap
import types
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from kafka_tiers.api import (
    ConfigError,
    PluginError,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    Secret,
    TopicPartition,
)
from kafka_tiers.api.secret import HIDDEN
from kafka_tiers.config import BrokerConfig, ConfigKey, String
from kafka_tiers.plugins.secrets import holds_secret, secret_config
from tests.remote.backends import MemoryStorage

VALUE = "kt-Secret-value-7f3e9a1c"


def _windows(value: str, size: int = 8) -> list[str]:
    return [value[i:i + size] for i in range(len(value) - size + 1)]


# --------------------------------------------------------------------------------------------
# The type


def test_repr_str_and_format_are_hidden() -> None:
    secret = Secret(VALUE)
    shown = [repr(secret), str(secret), f"{secret}", f"{secret!r}",
             "%s" % secret,  # noqa: UP031 - %-formatting, as logging does
             "%r" % (secret,),  # noqa: UP031
             "{}".format(secret),  # noqa: UP032 - str.format, as templates do
             repr([secret]), repr({"k": secret}), repr((secret,))]
    assert shown == [HIDDEN] * 3 + [HIDDEN] * 4 + [f"[{HIDDEN}]", f"{{'k': {HIDDEN}}}",
                                                   f"({HIDDEN},)"]
    assert f"{secret:>10}" == f"  {HIDDEN}"
    assert secret.reveal() == VALUE


def test_in_a_dataclass_and_an_exception() -> None:
    @dataclass(frozen=True)
    class Settings:
        user: str
        password: Secret

    settings = Settings("bob", Secret(VALUE))
    assert repr(settings).endswith(f"Settings(user='bob', password={HIDDEN})")
    assert asdict(settings)["password"] is settings.password  # deepcopy keeps the object
    error = ValueError(f"bad login for {settings.password}", settings.password)
    assert VALUE not in str(error) and VALUE not in repr(error)


def test_logging_shows_no_value(caplog: pytest.LogCaptureFixture) -> None:
    secret = Secret(VALUE)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kt.test").debug("config %s, %r, %s", secret, secret, {"k": secret})
    assert VALUE not in caplog.text and HIDDEN in caplog.text


def test_equality_and_hash_without_leaking() -> None:
    a, b, other = Secret(VALUE), Secret(VALUE), Secret("something-else")
    assert a == b and a != other and hash(a) == hash(b)
    assert a != VALUE and VALUE != a  # noqa: SIM300 - never equal to the plain string
    assert {a: 1}[b] == 1 and len({a, b, other}) == 2


def test_cannot_be_pickled_or_serialised_by_accident() -> None:
    secret = Secret(VALUE)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps({"password": secret}, protocol=protocol)
    with pytest.raises(TypeError, match="not JSON serializable"):
        json.dumps({"password": secret})
    assert json.dumps({"password": secret}, default=str) == '{"password": "<hidden>"}'


def test_is_no_str_and_is_immutable() -> None:
    secret = Secret(VALUE)
    assert not isinstance(secret, str)
    for operation in (lambda: secret + "x", lambda: "x" + secret,  # type: ignore[operator]
                      lambda: "Secret" in secret, lambda: len(secret),  # type: ignore[arg-type]
                      lambda: secret[0], lambda: secret.upper()):  # type: ignore[index,attr-defined]
        with pytest.raises((TypeError, AttributeError)):
            operation()
    with pytest.raises(AttributeError):
        secret._value = "other"  # type: ignore[misc]
    assert not hasattr(secret, "__dict__")
    with pytest.raises(TypeError):
        type("Leaky", (Secret,), {"__repr__": lambda self: self.reveal()})
    assert copy.copy(secret) is secret and copy.deepcopy(secret) is secret


def test_construction() -> None:
    with pytest.raises(TypeError):
        Secret(b"bytes")  # type: ignore[arg-type]
    secret = Secret(VALUE)
    assert Secret.of(secret) is secret and Secret.of(None) is None
    assert Secret.of(VALUE) == secret
    assert not Secret("") and Secret("x")


# --------------------------------------------------------------------------------------------
# Log records and foreign text


def test_every_log_record_is_scrubbed_while_the_secret_lives(
        caplog: pytest.LogCaptureFixture) -> None:
    """A client library logs the revealed value: message, arguments, traceback, stack."""
    secret = Secret(VALUE)
    plain = secret.reveal()
    log = logging.getLogger("some.sdk")
    with caplog.at_level(logging.DEBUG):
        log.debug("GET /x?sig=%s", plain)
        log.debug("headers %r", {"X-Token": plain.encode()})
        log.info("Authorization: Credential=" + plain + "/2024")
        try:
            raise ConnectionError(f"refused: {plain}")
        except ConnectionError:
            log.exception("request failed")
        log.warning("where %s", plain, stack_info=True)
    formatted = caplog.text
    everything = formatted + "".join(r.getMessage() + (r.exc_text or "") + (r.stack_info or "")
                                     for r in caplog.records)
    assert formatted.count(HIDDEN) >= 5
    assert not [w for w in _windows(VALUE) if w in everything]


def test_a_dead_secret_is_no_longer_hidden(caplog: pytest.LogCaptureFixture) -> None:
    """Only live secrets are searched for: the registry holds them weakly."""
    value = "kt-short-lived-secret-0b9d"
    secret = Secret(value)
    assert Secret.hide(f"x {value}") == f"x {HIDDEN}"
    del secret
    gc.collect()
    assert Secret.hide(f"x {value}") == f"x {value}"


def test_equal_secrets_are_tracked_one_by_one() -> None:
    """Two equal secrets: the death of one leaves the other hidden."""
    value = "kt-twin-secret-5a6b7c8d"
    first, second = Secret(value), Secret(value)
    assert first == second
    del first
    gc.collect()
    assert Secret.hide(value) == HIDDEN and second


def test_parts_and_encoded_forms_are_hidden() -> None:
    sas = "sv=2024-08-04&sr=c&sig=SiGnAtUrE%2Bvalue%3D"
    secret = Secret(sas, parts=["SiGnAtUrE%2Bvalue%3D"])
    text = (f"token {sas} alone SiGnAtUrE%2Bvalue%3D decoded SiGnAtUrE+value= "
            f"quoted {'SiGnAtUrE%252Bvalue%253D'}")
    hidden = Secret.hide(text)
    assert "SiGnAtUrE" not in hidden, hidden
    assert secret.reveal() == sas


def test_holds_secret_sees_a_value_split_by_pprint() -> None:
    secret = Secret("kt-session-TOKEN-never-shown-0a1b2c3d")
    split = ("(b'X-Amz-Security-Token: kt-session-TOKEN-never-'\n"
             " b'shown-0a1b2c3d\\r\\nX-Amz-Content-SHA256: e3b0c44298fc')")
    assert secret.reveal() not in split and holds_secret(split)
    assert not holds_secret("kt-session-TOKEN and something else")


def test_secret_config_wraps_the_declared_keys_only() -> None:
    given = {"user": "bob", "password": VALUE, "token": Secret("t0ken-value")}
    wrapped = secret_config(given, {"password", "token"})
    assert wrapped["user"] == "bob" and wrapped["token"] is given["token"]
    assert isinstance(wrapped["password"], Secret) and wrapped["password"].reveal() == VALUE
    assert given["password"] == VALUE  # the caller's mapping is left alone


# --------------------------------------------------------------------------------------------
# The core's config


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    import kafka_tiers.config as config_mod

    keys = (ConfigKey("test.password", String(pattern=r"[A-Za-z0-9-]+"), None,
                      aliases=("test.pass",), secret=True),)
    monkeypatch.setattr(config_mod, "TEST_SECRET_KEYS", keys, raising=False)
    monkeypatch.setattr(config_mod, "SECTIONS",
                        (*config_mod.SECTIONS, "kafka_tiers.config:TEST_SECRET_KEYS"))
    return "test.password"


def test_broker_config_holds_secret_keys_as_secret(secret_key: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    cfg = BrokerConfig({secret_key: f" {VALUE} ", "broker.id": "3",
                        "rsm.config.bucket": "b"})
    value = cfg[secret_key]
    assert isinstance(value, Secret) and value.reveal() == VALUE
    assert isinstance(cfg.originals[secret_key], Secret)
    assert VALUE not in repr(cfg) and f"{secret_key}={HIDDEN}" in repr(cfg)
    assert "broker.id=3" in repr(cfg) and "rsm.config" not in repr(cfg)
    assert (secret_key, HIDDEN, False) in list(cfg.describe())
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kafka_tiers.test").debug("config: %s %r %s", cfg, cfg,
                                                    dict(cfg.items()))
    assert VALUE not in caplog.text and HIDDEN in caplog.text
    again = cfg.with_overrides({"broker.id": "4"})
    assert again[secret_key] == value and again["broker.id"] == 4
    alias = BrokerConfig({"test.pass": VALUE})
    assert alias[secret_key] == value and isinstance(alias.originals["test.pass"], Secret)


def test_a_malformed_secret_value_is_never_in_the_error(secret_key: str) -> None:
    bad = "not allowed: spaces & symbols!"
    for given in ({secret_key: bad}, {"test.pass": bad}, {secret_key: Secret(bad)}):
        with pytest.raises(ConfigError) as info:
            BrokerConfig(given)
        error = info.value
        assert bad not in str(error) and bad not in repr(error.args)
        assert error.value is None and error.key in (secret_key, "test.pass")
    with pytest.raises(ConfigError) as info:
        BrokerConfig({secret_key: VALUE, "test.pass": bad})
    assert bad not in str(info.value) and VALUE not in str(info.value)


# --------------------------------------------------------------------------------------------
# Plugins: declared keys arrive as Secret; the loader and the guard hide them


class Vault(MemoryStorage):
    """A plugin declaring one secret key; configure fails the way a careless SDK does."""

    SECRET_KEYS = frozenset({"vault.token"})
    seen: ClassVar[dict[str, object]] = {}

    def configure(self, config: Mapping[str, str | Secret]) -> None:
        type(self).seen = dict(config)
        token = Secret.of(config["vault.token"])
        assert token is not None
        if config.get("fail") == "yes":
            raise RuntimeError(f"login refused for token {token.reveal()}")
        super().configure({"name": "vault"})

    def list_remote_segments(self, topic_partition: TopicPartition,
                             min_base_offset: int = 0) -> list[RemoteLogSegmentMetadata]:
        token = Secret.of(self.seen["vault.token"])  # type: ignore[arg-type]
        assert token is not None
        raise OSError(f"GET https://vault/?token={token.reveal()} refused")


def test_the_loader_hands_declared_keys_over_as_secret(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    from kafka_tiers.plugins import loader

    monkeypatch.setattr(loader, "resolve_class", lambda group, name: (Vault, "vault"))
    token = "kt-vault-token-5d6e7f80"
    with loader.load_remote_storage("vault", {"vault.token": token, "user": "bob"}):
        pass
    assert isinstance(Vault.seen["vault.token"], Secret) and Vault.seen["user"] == "bob"
    with pytest.raises(PluginError) as info:
        loader.load_remote_storage("vault", {"vault.token": token, "fail": "yes"})
    assert token not in str(info.value) and HIDDEN in str(info.value)


def test_the_guard_derives_what_to_hide_from_the_declared_keys() -> None:
    from kafka_tiers.remote.guarded import secret_values

    config = {"dir": "/data", "vault.token": "kt-guard-token-1a2b", "bucket": "b",
              "other": Secret("kt-other-secret-3c4d")}
    found = secret_values(config, {"vault.token"})
    assert all(isinstance(s, Secret) for s in found)
    assert {s.reveal() for s in found} == {"kt-guard-token-1a2b", "kt-other-secret-3c4d"}
    assert secret_values({"password": "pw-not-declared"}) == []  # never guessed from names


def test_the_guard_hides_secrets_in_foreign_errors() -> None:
    from kafka_tiers.remote.guarded import GuardedRemoteStorage

    token = "kt-guard-foreign-9e8d7c"
    guard = GuardedRemoteStorage(Vault(), "vault")
    guard.configure({"vault.token": token})
    assert isinstance(Vault.seen["vault.token"], Secret)
    with pytest.raises(RemoteStorageError) as info:
        guard.list_remote_segments(TopicPartition("t", 0))
    assert token not in str(info.value) and HIDDEN in str(info.value)
    assert info.value.__cause__ is None


# --------------------------------------------------------------------------------------------
# pytest -l -vv


_FAILING_TEST = '''
import pprint

from kafka_tiers.api import Secret

SECRET = "kt-pytest-SECRET-never-shown-4e5f6a7b"
TOKEN = "kt-pytest-TOKEN-never-shown-8c9d0e1f"


def client_call(headers):
    # a client library's frame: it holds the revealed values as plain str and bytes, long
    # enough for pytest -vv to split them over lines
    wire = (b"GET / HTTP/1.1\\r\\nUser-Agent: some-sdk/1.0 " + b"x" * 40
            + b"\\r\\nX-Token: " + headers["X-Token"].encode()
            + b"\\r\\nAuthorization: Key=" + headers["Key"].encode() + b"\\r\\n")
    raise ConnectionRefusedError("connection refused")


def test_fails_with_secrets_in_locals():
    config = {"key": Secret(SECRET), "token": Secret(TOKEN), "bucket": "b"}
    client_call({"X-Token": config["token"].reveal(), "Key": config["key"].reveal()})
'''


def _run_pytest(tmp_path: Path, *extra: str) -> str:
    test = tmp_path / "test_leaky.py"
    test.write_text(textwrap.dedent(_FAILING_TEST))
    (tmp_path / "none.ini").write_text("[pytest]\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(test), "-l", "-vv", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", str(tmp_path / "none.ini"), *extra],
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_pytest_l_vv_shows_no_secret_of_a_client_library_frame(tmp_path: Path) -> None:
    output = _run_pytest(tmp_path)
    assert "ConnectionRefusedError" in output and "headers    =" in output  # locals shown
    assert HIDDEN in output
    for value in ("kt-pytest-SECRET-never-shown-4e5f6a7b", "kt-pytest-TOKEN-never-shown-8c9d0e1f"):
        assert not [w for w in _windows(value) if w in output], output


def test_without_the_report_hiding_pytest_would_print_them(tmp_path: Path) -> None:
    """Why the kafka_tiers pytest plugin hides secrets in reports: the client's frames hold
    the revealed values, which Secret cannot hide."""
    output = _run_pytest(tmp_path, "-p", "no:kafka_tiers")
    assert "kt-pytest-TOKEN-never-shown-8c9d0e1f" in output


# --------------------------------------------------------------------------------------------
# docs


def test_the_storage_plugin_guide_snippet_runs() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "storage-plugins.md").read_text()
    section = doc[doc.index("## Secrets: declaring secret keys and using `Secret`"):]
    section = section[:section.index("\n## ", 1)]
    snippets = section.split("```python\n")[1:]
    assert len(snippets) == 1
    code = snippets[0][:snippets[0].index("```")]
    module = types.ModuleType("storage_plugins_snippet")  # dataclasses look their module up
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, "docs/storage-plugins.md", "exec"), module.__dict__)  # asserts inside
    finally:
        del sys.modules[module.__name__]
    assert isinstance(module.settings.token, Secret)
