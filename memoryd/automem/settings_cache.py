"""The effective settings of each project, re-read only when one of their files' stat changed.

Bounded: the most recently used MAX_CACHED_ROOTS projects (a daemon that runs for months sees
hundreds, most of them never again); one let go is read again when it comes back.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import structlog

from memoryd import settings as settings_mod
from memoryd.automem.stamps import Stat, stat_stamp

log = structlog.get_logger("memoryd.automem")

MAX_CACHED_ROOTS = 256


class SettingsCache:
    def __init__(self, flag_settings: Path | None) -> None:
        self.flag_settings = flag_settings
        # Per project root: the settings with the stats of the files they were read from.
        self._cache: OrderedDict[
            Path, tuple[tuple[Stat | None, ...], settings_mod.EffectiveSettings]
        ] = OrderedDict()

    def get(self, root: Path) -> settings_mod.EffectiveSettings:
        """`settings.load` for the project root, from cache while no settings file changed."""
        flag = self.flag_settings
        files = (
            settings_mod.policy_settings_path(),
            flag,
            settings_mod.user_settings_path(),
            settings_mod.project_settings_path(root),
            settings_mod.local_settings_path(root),
        )
        stamp = tuple(None if f is None else stat_stamp(f) for f in files)
        cached = self._cache.get(root)
        if cached is not None and cached[0] == stamp:
            self._cache.move_to_end(root)
            return cached[1]
        settings = settings_mod.load(root, flag)
        for file in settings.files:
            if file.error:  # once per change of the files, not per call
                log.warning("settings file skipped", path=str(file.path), error=file.error)
        self._cache[root] = (stamp, settings)
        self._cache.move_to_end(root)
        while len(self._cache) > MAX_CACHED_ROOTS:
            self._cache.popitem(last=False)
        return settings

    def __len__(self) -> int:
        return len(self._cache)
