"""Auto dream per memory dir: worktrees of one repository whose own settings name another
`autoMemoryDirectory` each get their own idle wait, day and back-off; worktrees that share the
repository's dir share them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from memoryd.automem.dream import RETRY_AFTER_S, Dream, dream_state_path
from memoryd.core.project import Project
from tests.automem.conftest import git, two_worktrees
from tests.background.conftest import Script, refusal, transcript
from tests.conftest import DaemonHandle, IsolatedEnv


class Worktrees:
    """`own` (its settings.local.json names a dir of its own), `plain` and `other` (both the
    repository's default dir), each with two memories; auto dream on in user settings."""

    def __init__(self, handle: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path) -> None:
        self.handle = handle
        self.own, self.plain = two_worktrees(tmp_path, bare=False)
        self.other = (tmp_path / "wt-other").resolve()
        git("worktree", "add", "-q", "-b", "other", str(self.other), "main", cwd=self.plain)
        self.own_dir = isolated_env.root / "own-memory"
        (self.own / ".claude").mkdir()
        (self.own / ".claude" / "settings.local.json").write_text(
            json.dumps({"autoMemoryDirectory": str(self.own_dir)})
        )
        isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
        (isolated_env.config_dir / "settings.json").write_text('{"autoDreamEnabled": true}')

    @property
    def dream(self) -> Dream:
        return self.handle.daemon.services.dream

    def another_dream(self) -> Dream:
        """A Dream of the same services, as a restarted or a second daemon has: it reads
        dream.json afresh."""
        return Dream(self.dream.host, self.dream.automem, self.dream.extraction)

    def project(self, cwd: Path) -> Project:
        return self.handle.daemon.services.projects.resolve(cwd)

    async def setup(self) -> dict[Path, str]:
        """Each worktree's memory dir, as memory.list names it."""
        dirs = {}
        for cwd in (self.own, self.plain, self.other):
            for i in range(2):
                await self.handle.call(
                    "memory.write",
                    cwd=str(cwd),
                    type="user",
                    name=f"{cwd.name} {i}",
                    description="d",
                    body="b",
                )
            dirs[cwd] = (await self.handle.call("memory.list", cwd=str(cwd)))["memory_dir"]
        assert dirs[self.own] == str(self.own_dir)
        assert dirs[self.plain] == dirs[self.other] != dirs[self.own]
        return dirs

    async def turn(self, cwd: Path) -> None:
        await self.handle.call(
            "after_turn", session_id=cwd.name, cwd=str(cwd), messages=transcript(("hi", "hello"))
        )


def _dreamt(script: Script) -> list[str]:
    """The memory dir of each dream run, from its first prompt."""
    return [
        body["messages"][0]["content"][0]["text"].split("`")[1]
        for body in script.seen["dream"]
        if len(body["messages"]) == 1
    ]


async def _idle_runs(dream: Dream, count: int) -> None:
    for _ in range(500):
        if dream.counts["idle_runs"] >= count and not dream._running:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"idle runs: {dream.counts['idle_runs']}, not {count}")


async def test_turns_alternating_between_worktrees_dream_each_ones_dir(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Before, the idle timer was the repository root's: a turn in the other worktree re-armed
    # it, and only the last turn's memory dir was consolidated.
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    trees.dream.idle_s = 0.3
    await trees.turn(trees.own)
    await trees.turn(trees.plain)
    assert trees.dream.feature_status()["auto_dream"]["armed"] == 2
    await _idle_runs(trees.dream, 2)
    assert sorted(_dreamt(script)) == sorted({dirs[trees.own], dirs[trees.plain]})


async def test_worktrees_sharing_the_repositorys_dir_share_its_idle_wait(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    trees.dream.idle_s = 0.3
    await trees.turn(trees.plain)
    await trees.turn(trees.other)
    assert trees.dream.feature_status()["auto_dream"]["armed"] == 1
    await _idle_runs(trees.dream, 1)
    await asyncio.sleep(0.4)  # no second run of the same dir
    assert _dreamt(script) == [dirs[trees.other]]
    assert not trees.dream.due(trees.project(trees.plain))


async def test_one_worktrees_dream_leaves_the_others_dir_due(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Before, the last run was recorded for the repository root: a dream of one worktree's own
    # dir made the repository's dir not due for a day, and its idle dream was never armed.
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    result = await daemon_with_model.call("memory.dream", cwd=str(trees.own))
    assert (result["memory_dir"], result["stop_reason"]) == (dirs[trees.own], "end_turn")
    assert not trees.dream.due(trees.project(trees.own))
    assert trees.dream.due(trees.project(trees.plain))
    await trees.turn(trees.plain)
    assert trees.dream.feature_status()["auto_dream"]["armed"] == 1
    state = json.loads(dream_state_path().read_text())
    assert list(state["last_run"]) == [dirs[trees.own]]
    # A refused run of the repository's dir holds that dir's idle dream off, not the other's.
    script.add("dream", refusal())
    result = await daemon_with_model.call("memory.dream", cwd=str(trees.plain))
    assert result["stop_reason"] == "error"
    restarted = trees.another_dream()
    now = time.time()
    assert not restarted.due(trees.project(trees.other), now)
    assert restarted.due(trees.project(trees.other), now + RETRY_AFTER_S + 60)
    assert not restarted.due(trees.project(trees.own), now)  # its own day still holds


async def test_a_last_run_kept_per_root_counts_for_the_roots_default_dir(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # dream.json as a daemon before session 21 wrote it, keyed by the repository root.
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    root = str(trees.project(trees.plain).root)
    now = time.time()
    dream_state_path().parent.mkdir(parents=True, exist_ok=True)
    dream_state_path().write_text(
        json.dumps({"last_run": {root: now - 60}, "failed_at": {root: now - 7200}})
    )
    dream = trees.another_dream()
    assert not dream.due(trees.project(trees.plain), now)  # not made due again
    assert not dream.due(trees.project(trees.other), now)
    assert dream.due(trees.project(trees.own), now)  # the root's entry is not its dir's
    trees.dream._last_runs = None  # the daemon's reads the file again
    await daemon_with_model.call("memory.dream", cwd=str(trees.plain))
    state = json.loads(dream_state_path().read_text())
    # The dir's own entry holds the run, and the root's too (`test_an_older_daemon_...`).
    assert sorted(state["last_run"]) == sorted([dirs[trees.plain], root])
    assert state["failed_at"] == {}


async def test_an_older_daemon_finds_the_run_of_the_roots_default_dir(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by the session 21 review: the dir's run replaced the root's entry, and a daemon
    # before session 21 (one the user went back to), which looks up the root, found no run
    # and dreamt the dir again that day. A dir of its own has no entry under the root.
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    root = str(trees.project(trees.plain).root)
    await daemon_with_model.call("memory.dream", cwd=str(trees.own))
    await daemon_with_model.call("memory.dream", cwd=str(trees.other))
    last_run = json.loads(dream_state_path().read_text())["last_run"]
    assert sorted(last_run) == sorted([dirs[trees.own], dirs[trees.plain], root])
    assert last_run[root] == last_run[dirs[trees.plain]] > last_run[dirs[trees.own]]


async def test_a_wait_is_let_go_when_auto_dream_is_turned_off_in_the_worktree(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    await trees.setup()
    await trees.turn(trees.own)
    assert trees.dream.feature_status()["auto_dream"]["armed"] == 1
    local = trees.own / ".claude" / "settings.local.json"
    local.write_text(json.dumps({**json.loads(local.read_text()), "autoDreamEnabled": False}))
    await trees.turn(trees.own)
    assert trees.dream.feature_status()["auto_dream"]["armed"] == 0


async def test_two_daemons_of_the_user_keep_each_others_runs(
    daemon_with_model: DaemonHandle, script: Script, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Two daemons of one user (another socket) share dream.json. Read once, each ran the
    # dreams the other had run that day, and each save dropped the other's last runs.
    trees = Worktrees(daemon_with_model, isolated_env, tmp_path)
    dirs = await trees.setup()
    other = trees.another_dream()
    assert other.due(trees.project(trees.own))  # read now: nothing ran yet
    await daemon_with_model.call("memory.dream", cwd=str(trees.own))
    assert not other.due(trees.project(trees.own))  # the first daemon's run counts
    await other.run(trees.project(trees.plain))
    state = json.loads(dream_state_path().read_text())
    root = str(trees.project(trees.plain).root)  # the default dir's run kept there too
    assert sorted(state["last_run"]) == sorted({dirs[trees.own], dirs[trees.plain], root})
    assert not trees.dream.due(trees.project(trees.plain))
