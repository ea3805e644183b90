"""Two different memories never overwrite each other (issue 16).

Names that slug to the same file get their own file (a `_2`, `_3` … suffix) unless the new
text is a near duplicate (a reported merge); the same name still updates in place; the index
file name and its case/width variants are never a memory file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle


async def _write(
    daemon: DaemonHandle, project: Path, name: str, body: str, **extra: object
) -> dict[str, object]:
    fields: dict[str, object] = {
        "type": "project",
        "name": name,
        "description": f"about {name}",
        "body": body,
        **extra,
    }
    result: dict[str, object] = await daemon.call("memory.write", cwd=str(project), **fields)
    return {k: result[k] for k in ("path", "created", "merged_into")}


def _index_files(memdir: Path) -> list[str]:
    from memoryd.automem.index import parse_index

    return [e.file for e in parse_index((memdir / "MEMORY.md").read_text())]


async def test_names_that_slug_alike_get_their_own_files(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    first = await _write(daemon, project, "Deploy Keys", "Rotate the staging deploy keys monthly.")
    second = await _write(
        daemon, project, "deploy-keys!", "Lunch orders go through the kitchen channel on Fridays."
    )
    assert first["path"] == str(memdir / "project_deploy_keys.md")
    assert second == {
        "path": str(memdir / "project_deploy_keys_2.md"),
        "created": True,
        "merged_into": None,
    }
    assert "Rotate the staging" in (memdir / "project_deploy_keys.md").read_text()
    assert "Lunch orders" in (memdir / "project_deploy_keys_2.md").read_text()
    assert _index_files(memdir) == ["project_deploy_keys.md", "project_deploy_keys_2.md"]

    # The same name updates its own file in place, whichever file it got.
    again = await _write(daemon, project, "deploy-keys!", "Lunch orders moved to Thursdays.")
    assert again == {"path": second["path"], "created": False, "merged_into": None}
    assert "Thursdays" in (memdir / "project_deploy_keys_2.md").read_text()
    assert "Rotate the staging" in (memdir / "project_deploy_keys.md").read_text()
    same = await _write(daemon, project, "Deploy Keys", "Rotate them weekly now.")
    assert same == {"path": first["path"], "created": False, "merged_into": None}
    assert len(_index_files(memdir)) == 2


@pytest.mark.parametrize("names", [(".", ".."), ("MEMORY.md", "ＭＥＭＯＲＹ.md", "memory.md")])
async def test_degenerate_and_index_like_names_never_collide(
    daemon: DaemonHandle, project: Path, memdir: Path, names: tuple[str, ...]
) -> None:
    bodies = [
        "The build cache lives on the shared NFS volume.",
        "Invoices are approved by the finance lead every Tuesday.",
        "The mobile app ships through the beta track first.",
    ]
    paths = []
    for name, body in zip(names, bodies, strict=False):
        res = await _write(daemon, project, name, body)
        assert res["created"] is True
        assert res["merged_into"] is None
        paths.append(str(res["path"]))
    assert len(set(paths)) == len(names)
    for path, body in zip(paths, bodies, strict=False):
        assert Path(path).parent == memdir
        assert Path(path).name.lower() != "memory.md"
        assert body in Path(path).read_text()
    assert len(_index_files(memdir)) == len(names)


async def test_a_near_duplicate_under_a_colliding_name_is_a_reported_merge(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    body = "Rotate the staging deploy keys on the first Monday of every month."
    first = await _write(daemon, project, "Deploy Keys", body)
    merged = await _write(daemon, project, "deploy keys!", body + " ")
    assert merged == {"path": first["path"], "created": False, "merged_into": first["path"]}
    assert _index_files(memdir) == ["project_deploy_keys.md"]


@pytest.mark.parametrize(
    "file", ["MEMORY.md", "memory.md", "Memory.md", "ＭＥＭＯＲＹ.md", "team/memory.md"]
)
async def test_index_name_variants_are_never_memory_files(
    daemon: DaemonHandle, project: Path, memdir: Path, file: str
) -> None:
    await _write(daemon, project, "Deploy Keys", "Rotate the staging deploy keys monthly.")
    with pytest.raises(RpcError) as info:
        await _write(daemon, project, "Other", "Something else entirely.", file=file)
    assert info.value.code == -32602
    assert "index" in info.value.message
    assert _index_files(memdir) == ["project_deploy_keys.md"]
    with pytest.raises(RpcError) as deleting:
        await daemon.call("memory.delete", cwd=str(project), path="memory.md")
    assert deleting.value.code in (-32602, -32002, -32001)


async def test_an_index_variant_on_disk_is_not_listed_as_a_memory(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await _write(daemon, project, "Deploy Keys", "Rotate the staging deploy keys monthly.")
    (memdir / "memory.md").write_text("- [x](y.md)\n")
    (memdir / "ＭＥＭＯＲＹ.md").write_text("- [x](y.md)\n")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == ["project_deploy_keys.md"]
