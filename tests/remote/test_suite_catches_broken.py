"""The storage conformance suite fails deliberately broken backends, naming the broken rule,
and passes the ``local`` backend when run through its options and its CLI command."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli


class Collector:
    """A pytest plugin recording test outcomes and the rules failing tests name."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.rules: dict[str, set[str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = report.nodeid.rpartition("::")[2]
        first_news = self.outcomes.get(name) in (None, "passed")
        if (report.when == "call" or report.outcome != "passed") and first_news:
            self.outcomes[name] = report.outcome
        for key, value in report.user_properties:
            if key == "kt_failed_rules":
                self.rules.setdefault(name, set()).update(str(value).split(","))

    def failed(self) -> set[str]:
        return {n for n, o in self.outcomes.items() if o == "failed"}

    def all_rules(self) -> set[str]:
        return {r for rules in self.rules.values() for r in rules}


SUITE_FILE = """
import pytest
from kafka_tiers.conformance.storage import StorageSuite, StorageTarget
from tests.remote.backends import {cls}

class TestBroken(StorageSuite):
    LARGE_SEGMENT_BYTES = 1024 * 1024

    @pytest.fixture
    def storage_target(self, tmp_path):
        return StorageTarget.from_class({cls}, {{"dir": str(tmp_path / "remote")}})
"""


def run_suite(tmp_path: Path, backend: str) -> tuple[int, Collector]:
    # a unique module name: nested runs share this process's sys.modules
    test_file = tmp_path / f"test_{backend.lower()}_{uuid.uuid4().hex[:8]}.py"
    test_file.write_text(SUITE_FILE.format(cls=backend))
    collector = Collector()
    code = pytest.main([str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir",
                        str(tmp_path)], plugins=[collector])
    return int(code), collector


@pytest.mark.parametrize(("backend", "rule", "test_name"), [
    ("NonOverwritingRetry", "retry-same-id-overwrites",
     "test_retried_copy_with_the_same_id_overwrites"),
    ("EndExclusiveFetch", "ranged-fetch-inclusive", "test_positions_by_lengths"),
    ("EmptyInsteadOfNotFound", "missing-transaction-index-not-found",
     "test_copy_without_transaction_index"),
    ("ManifestFirst", "failed-copy-invisible", "test_unreadable_local_file"),
])
def test_suite_fails_a_broken_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      backend: str, rule: str, test_name: str) -> None:
    code, collector = run_suite(tmp_path, backend)
    out = capsys.readouterr().out
    assert code == 1
    assert test_name in collector.failed(), sorted(collector.failed())
    assert rule in collector.rules[test_name]
    assert rule in out and "result: FAIL" in out
    # the broken rule is the reason: most of the suite still passes
    assert sum(1 for o in collector.outcomes.values() if o == "passed") > 10


#: the data-path rules (issue 16) whose checks read ranges of the log: a backend whose ranged
#: reads are wrong breaks them too
DATA_PATH_RANGE_RULES = {"chunk-boundary-ranges", "chunk-cache-bounded", "chunk-cache-eviction",
                         "compression", "compression-heuristic", "encrypted-at-rest",
                         "key-rotation", "one-download-per-chunk",
                         "rekey-rewraps-manifest-only"}
#: the data-path rules a backend breaks when its copy writes plain objects and an old manifest
#: (no chunk index, no compression, no encryption) whatever the data-path settings say (a long
#: read of a plain log streams past the chunk cache, so its cache stays empty too)
DATA_PATH_COPY_RULES = {"chunked-layout", "chunk-cache-bounded", "chunk-cache-eviction",
                        "compression",
                        "compression-heuristic", "encrypted-at-rest", "key-rotation",
                        "one-download-per-chunk", "rekey-rewraps-manifest-only",
                        "tamper-detected", "unknown-key-named"}


@pytest.mark.parametrize(("backend", "rules"), [
    ("EndExclusiveFetch", {"ranged-fetch-inclusive", "concurrent-access"}
     | DATA_PATH_RANGE_RULES),
    ("ManifestFirst", {"failed-copy-invisible"} | DATA_PATH_COPY_RULES),
    ("NonOverwritingRetry", {"retry-same-id-overwrites", "failed-copy-invisible"}),
])
def test_broken_backends_fail_only_their_rules(tmp_path: Path, backend: str,
                                               rules: set[str]) -> None:
    _, collector = run_suite(tmp_path, backend)
    assert collector.all_rules() == rules


DATA_PATH_SUITE_FILE = """
import pytest
from kafka_tiers.conformance.storage import (CacheTests, ChunkingTests, CompressionTests,
                                             EncryptionTests, StorageTarget)
from tests.remote.broken_data_path import {cls}

class TestBroken(ChunkingTests, CompressionTests, EncryptionTests, CacheTests):
    @pytest.fixture
    def storage_target(self, tmp_path):
        return StorageTarget.from_class({cls}, {{"dir": str(tmp_path / "remote")}})
"""


@pytest.mark.parametrize(("backend", "selected", "broken"), [
    ("PlaintextClaimingEncryption", "plaintext or flipped_byte_in_a_log",
     {"test_no_plaintext_at_rest[aes]": "encrypted-at-rest",
      "test_no_plaintext_at_rest[zstd-aes]": "encrypted-at-rest",
      "test_flipped_byte_in_a_log_chunk_is_detected[aes]": "tamper-detected",
      "test_flipped_byte_in_a_log_chunk_is_detected[zstd-aes]": "tamper-detected"}),
    ("WrongByteAfterChunkBoundary", "chunked_segment",
     {f"test_chunked_segment_reads_back[{case}]": "chunk-boundary-ranges"
      for case in ("1-byte-plain", "1-byte-zstd-aes", "odd-plain", "odd-zstd-aes")}),
    ("NoSingleFlight", "concurrent_readers",
     {"test_concurrent_readers_of_a_chunk_download_it_once": "one-download-per-chunk"}),
    ("CacheOverItsSize", "cache_stays",
     {"test_cache_stays_within_its_size[memory]": "chunk-cache-bounded",
      "test_cache_stays_within_its_size[disk]": "chunk-cache-bounded",
      "test_evicted_chunk_is_downloaded_again": "chunk-cache-eviction"}),
])
def test_data_path_areas_fail_a_broken_data_path(tmp_path: Path, backend: str, selected: str,
                                                 broken: dict[str, str]) -> None:
    """The data-path areas alone (a class of only them, as a third party may compose) against a
    ``local`` backend with one data-path rule broken: the tests of that rule fail naming it,
    the cache checks still pass."""
    # a name without the backend's: -k also matches the module name
    test_file = tmp_path / f"test_broken_{uuid.uuid4().hex[:8]}.py"
    test_file.write_text(DATA_PATH_SUITE_FILE.format(cls=backend))
    collector = Collector()
    code = pytest.main([str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir",
                        str(tmp_path), "-k", f"{selected} or evicted or concurrent_readers"],
                       plugins=[collector])
    assert code == 1
    for test_name, rule in broken.items():
        assert test_name in collector.failed(), sorted(collector.failed())
        assert rule in collector.rules[test_name], collector.rules[test_name]
    passed = {n for n, o in collector.outcomes.items() if o == "passed"}
    # the broken rule is the reason: the others selected still pass
    assert passed and not passed & set(broken), sorted(passed)
    assert {n for n, o in collector.outcomes.items() if o == "failed"} == set(broken)


def test_options_run_the_suite_against_local(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    collector = Collector()
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--kt-storage", "local", "--kt-storage-set", "dir={tmp}",
                        "-k", "not large_segment"], plugins=[collector])
    out = capsys.readouterr().out
    assert code == 0, out
    assert len([o for o in collector.outcomes.values() if o == "passed"]) >= 30
    assert "kafka-tiers storage conformance" in out and "result: PASS" in out
    assert "multipart_upload" in out and "not declared" in out


def test_cli_runs_the_suite_against_local(tmp_path: Path) -> None:
    props = tmp_path / "local.properties"
    props.write_text("# the local backend's own keys\ndir={tmp}\n")
    result = CliRunner().invoke(cli, ["conformance", "storage", "local", "--config", str(props),
                                      "--", "-q", "-p", "no:cacheprovider", "-k",
                                      "copy_fetch or ranges", "--rootdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "result: PASS" in result.output


def test_unknown_plugin_is_a_clear_failure(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--kt-storage", "no-such-storage", "-k", "ranges"])
    out = capsys.readouterr().out
    assert code == 1
    assert "unknown remote storage plugin 'no-such-storage'" in out
