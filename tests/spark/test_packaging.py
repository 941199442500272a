"""The Spark support is an optional extra: the core imports and its CLI runs without pyspark,
and PySpark's own lookup of ``pyspark_*`` modules finds the data source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BLOCK = ("import sys\n"
         "class Block:\n"
         "    def find_spec(self, name, path=None, target=None):\n"
         "        if name.split('.')[0] in ('pyspark', 'pyarrow', 'py4j'):\n"
         "            raise ImportError(f'No module named {name!r}', name=name)\n"
         "sys.meta_path.insert(0, Block())\n")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_core_and_cli_work_without_pyspark() -> None:
    done = _run("import kafka_tiers, kafka_tiers.broker, kafka_tiers.cli, kafka_tiers.spark\n"
                "import kafka_tiers.cli.spark\n"
                "assert not [m for m in sys.modules if m.startswith(('pyspark', 'pyarrow'))]\n"
                "from kafka_tiers.cli import main\n"
                "main(['spark', 'audit', '--storage', 'local', '--config', 'pyproject.toml'])\n")
    assert done.returncode == 2, done.stderr
    assert "pip install 'kafka-tiers[spark]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_pyspark_lookup_finds_the_data_source_without_registration() -> None:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    code = (
        "import io\n"
        "from pyspark.serializers import read_int, UTF8Deserializer\n"
        "from pyspark.sql.worker.lookup_data_sources import _main\n"
        "out = io.BytesIO()\n"
        "_main(io.BytesIO(), out)\n"
        "out.seek(0)\n"
        "n = read_int(out)\n"
        "names = []\n"
        "for _ in range(n):\n"
        "    names.append(UTF8Deserializer().loads(out))\n"
        "    out.read(read_int(out))\n"
        "print(names)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=120, env={"PYTHONPATH": str(REPO),
                                                     "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "'kafka-tiers'" in done.stdout
