"""The icesql home: the directory a session keeps its catalog store in, and why a path cannot be one."""

from __future__ import annotations

import os
from pathlib import Path

from icesql.errors import UsageError

HOME_HINT = "point --home (or ICESQL_HOME) at a directory icesql may create and write"


def default_home() -> Path:
    from icesql import settings

    return home_path(settings.HOME.get() or "~/.icesql")


def home_path(home: str | os.PathLike[str]) -> Path:
    try:
        return Path(home).expanduser()
    except RuntimeError:  # ~user of a user that does not exist
        raise UsageError(f"cannot use {str(home)!r} as the icesql home: no such user", hint=HOME_HINT) from None


def make_home(home: Path) -> None:
    """Create the home (owner-only) or say, as a usage error, why it cannot be one."""
    problem = None
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        problem = "it is a file, not a directory"
    except NotADirectoryError:
        problem = "a part of the path is a file, not a directory"
    except PermissionError:
        problem = "permission denied"
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
    if problem is None and not home.is_dir():
        problem = "it is not a directory"
    if problem is not None:
        raise UsageError(f"cannot use {str(home)!r} as the icesql home: {problem}", hint=HOME_HINT)


__all__ = ["HOME_HINT", "default_home", "home_path", "make_home"]
