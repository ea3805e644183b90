"""The systemd service unit gives up on a daemon that fails at every start.

systemd refuses a start once more than StartLimitBurst starts fell within StartLimitIntervalSec
(defaults 5 and 10 s); `tripped` replays its rate limit (`ratelimit_below` in systemd's
src/basic/ratelimit.c) over the starts of a crash loop, spaced by RestartSec plus the time the
daemon ran before it failed. Before, RestartSec=2 with the defaults spread 5 starts over just
over 10 s, the window began again at every 6th start, and a broken installation was started
every 2 s for ever.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memctl import service_units

SYSTEMD_DEFAULT_INTERVAL_S = 10.0  # DefaultStartLimitIntervalSec in systemd's user.conf
SYSTEMD_DEFAULT_BURST = 5  # DefaultStartLimitBurst


def _seconds(value: str) -> float:
    # The unit writes plain seconds (no "5min"): anything else is a test to update, not parse.
    return float(value)


def _service_settings(tmp_path: Path) -> dict[str, str]:
    units = service_units.systemd_units(
        tmp_path,
        ["/opt/memoryd/bin/memoryd"],
        tmp_path / "run" / "memoryd" / "memoryd.sock",
        tmp_path / "memoryd.log",
        str(tmp_path / "run"),
        env_file=tmp_path / "home" / ".config" / "memoryd" / "env",
    )
    (service,) = [u for u in units if u.path.name == "memoryd.service"]
    settings: dict[str, str] = {}
    for line in service.text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def tripped(restart_s: float, ran_s: float, interval_s: float, burst: int, starts: int) -> bool:
    """Whether systemd refuses one of `starts` starts of a loop (each fails after `ran_s`)."""
    begin: float | None = None
    count = 0
    for n in range(starts):
        now = n * (restart_s + ran_s)
        if begin is None or now - begin > interval_s:
            begin, count = now, 1
            continue
        if count >= burst:
            return True
        count += 1
    return False


@pytest.mark.parametrize(
    "ran_s",
    [
        0.01,  # its Python gone: 203/EXEC at once
        0.6,  # an import broken by an upgrade: exit 1 once Python has started
        10.0,  # failing once it has served a little while
    ],
)
def test_a_daemon_failing_at_every_start_is_given_up_on(tmp_path: Path, ran_s: float) -> None:
    settings = _service_settings(tmp_path)
    assert settings["Restart"] == "on-failure"
    interval_s = _seconds(settings.get("StartLimitIntervalSec", str(SYSTEMD_DEFAULT_INTERVAL_S)))
    burst = int(settings.get("StartLimitBurst", str(SYSTEMD_DEFAULT_BURST)))
    restart_s = _seconds(settings["RestartSec"])
    assert tripped(restart_s, ran_s, interval_s, burst, starts=1000)


def test_a_few_restarts_by_hand_are_not_refused(tmp_path: Path) -> None:
    # `systemctl --user restart` counts as a start too: a user trying settings restarts a few
    # times in a minute, and that must not read as a crash loop.
    settings = _service_settings(tmp_path)
    interval_s = _seconds(settings["StartLimitIntervalSec"])
    burst = int(settings["StartLimitBurst"])
    assert not tripped(restart_s=0.0, ran_s=12.0, interval_s=interval_s, burst=burst, starts=5)


def test_the_replayed_limit_is_systemds() -> None:
    # Its defaults refuse a 6th start within 10 s, and forget the window once it has passed.
    assert tripped(restart_s=1.0, ran_s=0.0, interval_s=10, burst=5, starts=6)
    assert not tripped(restart_s=2.0, ran_s=0.01, interval_s=10, burst=5, starts=1000)
