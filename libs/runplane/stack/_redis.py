"""The local Redis: no persistence (it holds only indexes rebuildable from Kafka)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import redis

from runplane.stack._config import StackConfig
from runplane.stack._errors import StackError
from runplane.stack.process import tail

Progress = Callable[[str], None]


def redis_binary(config: StackConfig) -> str:
    binary = shutil.which(config.redis_server)
    if binary is None:
        raise StackError("redis-server not found: `apt-get install -y redis-server`")
    return binary


def render_config(config: StackConfig) -> Path:
    config.redis_dir.mkdir(parents=True, exist_ok=True)
    path = config.redis_dir / "redis.conf"
    path.write_text(
        "# Written by `runplane up`: an index cache, rebuilt from Kafka, so no persistence.\n"
        f"bind {config.redis_host}\n"
        f"port {config.redis_port}\n"
        "protected-mode yes\n"
        "daemonize no\n"
        f"dir {config.redis_dir}\n"
        'save ""\n'
        "appendonly no\n"
        'logfile ""\n'
        "databases 16\n"
        "maxclients 1000\n"
    )
    return path


def redis_argv(config: StackConfig, binary: str) -> list[str]:
    return [binary, str(config.redis_dir / "redis.conf")]


def redis_markers(config: StackConfig) -> tuple[str, ...]:
    # redis-server rewrites its process title to "redis-server HOST:PORT".
    return ("redis-server", f":{config.redis_port}")


def redis_log_tail(config: StackConfig, lines: int = 20, *, since: int = 0) -> str:
    path = config.logs_dir / "redis.log"
    text = tail(path, lines, since=since)
    return f"--- {path} (last lines) ---\n{text}" if text else ""


def redis_answers(url: str, timeout: float = 1.0) -> int | None:
    """Number of keys if Redis at ``url`` answers PING; None otherwise."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
        return int(client.dbsize())
    except redis.RedisError:
        return None
    finally:
        client.close()


def wait_redis(
    config: StackConfig, alive: Callable[[], bool], started: float, *, since: int = 0
) -> None:
    deadline = started + min(config.start_timeout, 30.0)
    while time.monotonic() < deadline:
        if redis_answers(config.redis_url, timeout=0.5) is not None:
            return
        if not alive():
            raise StackError(
                "Redis exited during start-up.\n" + redis_log_tail(config, since=since)
            )
        time.sleep(0.05)
    raise StackError(f"Redis did not answer PING on {config.redis_url}.\n" + redis_log_tail(config))
