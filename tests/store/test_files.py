"""The store file is owner-only, and the package stays free of icesql and heavy imports."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from catalog_store import CatalogStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_store_is_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a typical permissive umask
    try:
        path = tmp_path / "a" / "b" / "catalog.db"
        with CatalogStore(path) as store:
            store.create_secret("pw", "v")
            wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
            assert wal.exists() and shm.exists()
            assert _mode(wal) == 0o600 and _mode(shm) == 0o600
        assert _mode(path) == 0o600
        assert _mode(path.parent) == 0o700
        assert _mode(path.parent.parent) == 0o700
    finally:
        os.umask(old)


def test_existing_loose_file_is_tightened(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    path = directory / "catalog.db"
    CatalogStore(path).close()
    os.chmod(path, 0o644)
    with CatalogStore(path) as store:
        store.create_object("source", "a", "s", {})
        assert _mode(path) == 0o600
        for suffix in ("-wal", "-shm"):
            extra = Path(f"{path}{suffix}")
            if extra.exists():
                assert _mode(extra) == 0o600
    assert _mode(directory) == 0o755  # an existing directory is the user's, left alone


def test_imports_only_the_standard_library(tmp_path: Path) -> None:
    code = (
        "import sys, catalog_store\n"
        "s = catalog_store.CatalogStore(sys.argv[1])\n"
        "s.create_secret('pw', 'v'); s.get_secret('pw'); s.close()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'icesql', 'pyspark', 'pyiceberg', 'pyarrow', 'cryptography', 'lark'})\n"
        "print(','.join(bad))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ICESQL_SECRET_KEY"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.db")],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env=env,
    )
    assert out.stdout.strip() == ""
