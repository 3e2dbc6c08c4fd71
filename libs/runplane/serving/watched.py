"""Configuration files a service re-reads when they change: principals, emitters.

A deployment mounts these as Kubernetes Secrets (a directory whose ``..data`` symlink the
kubelet swaps on rotation) or edits them in place. :class:`WatchedFile` stats the file on
every lookup (one ``stat``, no read) and re-reads it when its identity changes — mtime, size
or inode of the file the path resolves to — so a rotated token or a revoked key takes effect
on the next request, no restart. A new version that does not load is refused with a warning
and the last good one stays in force: a typo in a rotation must not lock everyone out, nor let
anyone in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from runplane.errors import ConfigError

__all__ = ["WatchedFile", "listed", "load_yaml_secret", "secret_target"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Signature = tuple[int, int, int, int]  # (device, inode, mtime ns, size) of the resolved file


def secret_target(path: Path, names: Sequence[str]) -> Path:
    """The file ``path`` names: itself, or the first of ``names`` inside a secret directory."""
    if not path.is_dir():
        return path
    found = [path / n for n in names if (path / n).is_file()]
    if not found:
        raise ConfigError(f"{path} holds none of {', '.join(names)}")
    return found[0]


def load_yaml_secret(path: Path, what: str, names: Sequence[str]) -> tuple[Any, Path]:
    """The parsed YAML of ``path`` (a file, or a mounted secret directory holding one of
    ``names``) and the file it came from; ConfigError naming ``what`` when it cannot be read."""
    target = secret_target(path, names)
    try:
        return yaml.safe_load(target.read_text(encoding="utf-8")), target
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {what} file {target}: {exc}") from exc


def listed(data: Any, section: str, where: str) -> Sequence[Any]:
    """The list under ``section`` of a parsed file, or the file itself when it is a bare list
    (empty when absent); ConfigError when it is not a list."""
    items = data.get(section) if isinstance(data, Mapping) else data
    if items is None:
        return []
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise ConfigError(f"{where}: expected a list of {section}")
    return items


class WatchedFile(Generic[T]):
    """The value ``load`` makes of a file, re-made when the file changes.

    Construction loads the file and raises ``ConfigError`` when it is bad: a service must not
    start with a broken file. ``path=None`` means ``empty``, for good.
    """

    def __init__(
        self,
        path: Path | None,
        load: Callable[[Path], T],
        empty: T,
        *,
        what: str,
        names: Sequence[str],
    ) -> None:
        self.path = path
        self._load, self._what, self._names = load, what, tuple(names)
        self._lock = threading.Lock()
        self._signature: Signature | None = None
        self._refused: Signature | None = None  # a version that failed to load
        self._missing = False  # warned that the file cannot be stat'ed
        self._value = empty
        if path is not None:
            # The signature before the read: a change in between is then seen as a change.
            try:
                self._signature = self._stat(path)
            except OSError as exc:
                raise ConfigError(f"cannot read {what} file {path}: {exc}") from exc
            self._value = load(path)

    def _stat(self, path: Path) -> Signature:
        st = secret_target(path, self._names).stat()  # follows a swapped ..data link
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)

    def current(self) -> T:
        """The value in force now (re-read first if the file changed)."""
        if self.path is None:
            return self._value
        try:
            signature = self._stat(self.path)
        except (OSError, ConfigError) as exc:
            # Mid-rotation or removed: keep serving what was loaded rather than nothing.
            if not self._missing:
                self._missing = True
                log.warning(
                    "cannot stat %s file %s (keeping the previous): %s", self._what, self.path, exc
                )
            return self._value
        self._missing = False
        if signature == self._signature or signature == self._refused:
            return self._value
        with self._lock:
            if signature not in (self._signature, self._refused):
                self._reload(signature)
            return self._value

    def _reload(self, signature: Signature) -> None:
        assert self.path is not None
        try:
            loaded = self._load(self.path)
        except ConfigError as exc:
            self._refused = signature
            log.warning(
                "%s file changed but was not loaded (keeping the previous): %s", self._what, exc
            )
            return
        self._value, self._signature, self._refused = loaded, signature, None
        log.info(f"{self._what} reloaded", extra={"path": str(self.path)})
