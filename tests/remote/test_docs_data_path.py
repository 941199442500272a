"""docs/tiered-storage.md's data path section: every data-path key is documented with its real
default, and every snippet of the worked example works: the openssl commands run (the key
directory moved into the test's temporary directory), the ``server.properties`` snippets load
through :func:`storage_settings` and :meth:`DataSettings.from_config` with the keys they made,
and the ``remote describe`` lines are what the command prints for such a segment."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kafka_tiers.objectstore.data_settings import DATA_KEYS, DataSettings
from kafka_tiers.objectstore.encryption import new_data_key
from tests.docs_pages import checked_page_text

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tiered-storage.md"
#: the key directory of the worked example, moved into tmp_path by the tests
KEY_DIR = "/etc/kafka/tier-keys"
CACHE_DIR = "/var/cache/kafka-tier-chunks"


def section() -> str:
    text = checked_page_text(PAGE)
    start = text.index("## The data path: chunks, compression, encryption at rest")
    return text[start:text.index("\n## ", start + 1)]


def worked_example() -> str:
    """The worked example's subsection (other parts' subsections have blocks of their own)."""
    text = section()
    start = text.index("### Worked example: S3, compression, encryption and a disk cache")
    end = text.find("\n### ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def blocks(kind: str) -> list[str]:
    """The worked example's ```kind blocks, in order."""
    return re.findall(rf"^```{kind}\n(.*?)^```", worked_example(), re.M | re.S)


def key_rows() -> dict[str, str]:
    """key -> default cell of the data path keys table."""
    rows = {}
    for key, default in re.findall(r"^\| `([a-z<>.]+)` \| ([^|]+) \|", section(), re.M):
        rows[key] = default.strip()
    return rows


def _default_number(cell: str) -> str:
    match = re.match(r"`([^`]+)`", cell)
    assert match, cell
    return match.group(1)


def test_every_data_path_key_has_a_row_with_its_real_default() -> None:
    rows = key_rows()
    documented = set(rows)
    wanted = set(DATA_KEYS) | {"encryption.key.pairs.<id>.public.key.file",
                               "encryption.key.pairs.<id>.private.key.file"}
    assert wanted <= documented, sorted(wanted - documented)
    defaults = DataSettings.from_config({})
    real = {
        "chunk.size": defaults.chunk_size,
        "compression.enabled": defaults.compression,
        "compression.heuristic.enabled": defaults.compression_heuristic,
        "compression.zstd.level": defaults.zstd_level,
        "encryption.enabled": defaults.encryption,
        "encryption.plaintext.segments.readable": defaults.plaintext_segments_readable,
        "fetch.chunk.cache.class": defaults.cache.kind,
        "fetch.chunk.cache.size": defaults.cache.size,
        "fetch.chunk.cache.retention.ms": defaults.cache.retention_ms,
        "fetch.chunk.cache.prefetch.max.size": defaults.cache.prefetch_max_size,
        "fetch.chunk.download.threads": defaults.download_threads,
        "fetch.manifest.cache.size": defaults.manifest_cache_size,
        "fetch.manifest.cache.retention.ms": defaults.manifest_cache_retention_ms,
    }
    for key, value in real.items():
        shown = _default_number(rows[key])
        expected = str(value).lower() if isinstance(value, bool) else str(value)
        assert shown == expected, (key, shown, expected)
    for key in ("encryption.key.pair.id", "encryption.key.pairs", "fetch.chunk.cache.path"):
        assert rows[key] == "(none)", key
    assert defaults.key_ring is None and defaults.cache.path is None


def test_the_page_links_kip_405_and_aivens_plugin_by_their_public_pages() -> None:
    text = checked_page_text(PAGE)
    assert "https://cwiki.apache.org/confluence/display/KAFKA/KIP-405" in text
    assert "https://github.com/Aiven-Open/tiered-storage-for-apache-kafka" in section()


def _run_shell(snippet: str, tmp_path: Path) -> None:
    script = snippet.replace(KEY_DIR, str(tmp_path / "tier-keys"))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def made_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worked example's shell snippets, run: key pairs k1 and k2 (4096-bit RSA: openssl
    takes a second or two each)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    tmp_path = tmp_path_factory.mktemp("docs-keys")
    shells = blocks("sh")
    assert len(shells) == 2, "the key pair and the rotation snippets"
    for snippet in shells:
        _run_shell(snippet, tmp_path)
    return tmp_path


def _properties(snippet: str, tmp_path: Path) -> str:
    return (snippet.replace(KEY_DIR, str(tmp_path / "tier-keys"))
            .replace(CACHE_DIR, str(tmp_path / "chunks")))


def test_the_shell_snippets_make_key_files_of_the_right_kind(made_keys: Path) -> None:
    keys = made_keys / "tier-keys"
    for pid in ("k1", "k2"):
        assert (keys / f"{pid}-private.pem").read_text().startswith("-----BEGIN PRIVATE KEY")
        assert (keys / f"{pid}-public.pem").read_text().startswith("-----BEGIN PUBLIC KEY")
        assert (keys / f"{pid}-private.pem").stat().st_mode & 0o077 == 0
    assert (keys.stat().st_mode & 0o777) == 0o700


def test_the_server_properties_snippets_load_and_rotate(made_keys: Path) -> None:
    from kafka_tiers.config import read_properties
    from kafka_tiers.remote.storage_config import BROKER_DIALECT, storage_settings

    first, rotation = blocks("properties")
    server = made_keys / "server.properties"
    server.write_text(_properties(first, made_keys))
    assert read_properties(server)["remote.log.storage.enable"] == "true"
    settings = storage_settings(None, server)
    assert settings.plugin == "s3" and settings.dialect == BROKER_DIALECT
    data = DataSettings.from_config(settings.config)
    assert data.chunk_size == 4 << 20 and data.compression and data.compression_heuristic
    assert data.encryption and data.key_ring is not None and data.key_ring.active_id == "k1"
    assert data.cache.kind == "disk" and data.cache.path == str(made_keys / "chunks")
    assert data.cache.size == 10 << 30 and data.cache.prefetch_max_size == 16 << 20
    key_id, wrapped = data.key_ring.wrap(key := new_data_key())
    assert key_id == "k1" and data.key_ring.unwrap(key_id, wrapped) == key
    # the rotation snippet's keys replace the first one's
    change = made_keys / "rotation.properties"
    change.write_text(_properties(rotation, made_keys))
    merged = {**read_properties(server), **read_properties(change)}
    server.write_text("".join(f"{k}={v}\n" for k, v in merged.items()))
    rotated = DataSettings.from_config(storage_settings(None, server).config)
    ring = rotated.key_ring
    assert ring is not None and ring.active_id == "k2" and ring.ids == ["k1", "k2"]
    assert ring.wrap(key)[0] == "k2" and ring.unwrap("k1", wrapped) == key


def test_the_describe_lines_are_what_describe_prints() -> None:
    from kafka_tiers.cli.remote import _data_lines

    (shown,) = [b for b in blocks("console") if b.startswith("format_version")]
    lines = shown.rstrip("\n").splitlines()
    values = {line[:24].strip(): line[24:].strip() for line in lines}
    chunks, chunk_size = re.fullmatch(r"(\d+) of (\d+) bytes", values["chunks"]).groups()
    original, stored = map(int, re.match(r"(\d+) bytes, stored (\d+)", values["size"]).groups())
    data = {"format_version": int(values["format_version"]), "chunk_size": int(chunk_size),
            "chunks": int(chunks), "original_size": original, "stored_size": stored,
            "ratio": round(stored / original, 4), "compression": "zstd", "key_id": "k1",
            "indexes": values["indexes"], "encrypted": True}
    assert -(-original // int(chunk_size)) == int(chunks)
    cache = {"chunk_cache": {"hits": 0, "misses": 0}, "manifest_cache": {"hits": 0, "misses": 0},
             "downloads": 0}
    assert _data_lines(data, cache) == lines


def test_the_rekey_commands_of_the_page_parse() -> None:
    from click.testing import CliRunner

    from kafka_tiers.cli import cli

    commands = [line[2:].split() for b in blocks("console") for line in b.splitlines()
                if line.startswith("$ kafka-tiers remote rekey")]
    assert len(commands) == 3
    for argv in commands:
        # --help after the arguments: click parses them all, then prints the help
        result = CliRunner().invoke(cli, [*argv[1:], "--help"])
        assert result.exit_code == 0, result.output
