"""Team file names in another Unicode form (issue 14): macOS writes names decomposed (NFD);
keys are NFC. Such a file is pushed under its NFC key and a pull writes that key back into
the same file, never a second one beside it."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from memoryd.team.sync.localfs import LocalFolder
from tests.team.conftest import REPO, SideFactory, server_history
from tests.team_server.conftest import ThreadedServer

NFC_NAME = "café/ünïcode.md"
NFD_NAME = unicodedata.normalize("NFD", NFC_NAME)


def test_a_decomposed_name_scans_as_its_nfc_key(tmp_path: Path) -> None:
    folder = LocalFolder(tmp_path / "team")
    (tmp_path / "team" / NFD_NAME).parent.mkdir(parents=True)
    (tmp_path / "team" / NFD_NAME).write_text("Accents.\n")
    scan = folder.scan()
    assert scan.invalid == {}
    assert list(scan.checksums) == [NFC_NAME]
    assert folder.read(NFC_NAME) == "Accents.\n"
    assert folder.exists(NFC_NAME)
    assert folder.path_of(NFC_NAME) == tmp_path / "team" / NFD_NAME


def test_two_files_whose_names_are_one_key_push_only_the_nfc_one(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "é.md").write_text("composed\n")
    (team / unicodedata.normalize("NFD", "é.md")).write_text("decomposed\n")
    scan = LocalFolder(team).scan()
    assert list(scan.checksums) == ["é.md"]
    assert scan.contents["é.md"] == "composed\n"
    (why,) = scan.invalid.values()
    assert "NFC" in why


async def test_a_decomposed_name_is_pushed_and_pulled_back_into_the_same_file(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    mac = make_side("mac", server.url, token)
    mac.write(NFD_NAME, "Written on a Mac.\n")
    report = await mac.engine.push()
    assert report.pushed == [NFC_NAME]
    assert server_history(server)[NFC_NAME] == ["Written on a Mac.\n"]

    linux = make_side("linux", server.url, token)
    await linux.engine.pull()
    assert linux.read(NFC_NAME) == "Written on a Mac.\n"
    linux.write(NFC_NAME, "Edited on Linux.\n")
    await linux.engine.push()

    await mac.engine.pull()
    names = [p.relative_to(mac.team_dir).as_posix() for p in mac.team_dir.rglob("*.md")]
    assert names == [NFD_NAME]  # the same file, updated; no NFC twin beside it
    assert mac.read(NFD_NAME) == "Edited on Linux.\n"
    assert (await mac.engine.push()).requests == 0


async def test_a_key_that_needs_a_local_file_as_its_folder_is_refused_until_it_moves(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    """A teammate's `a.md/b.md` where this folder holds a file `a.md`: refused as a raw
    "[Errno 17] File exists" marked `will retry:`, so each pull (every minute) asked for the
    whole listing again instead of a 304, and said nothing a user could act on."""
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    alice.write("a.md/b.md", "under a folder\n")
    assert (await alice.engine.push()).pushed == ["a.md/b.md"]
    bob = make_side("bob", server.url, token)
    bob.write("a.md", "my file\n")
    report = await bob.engine.pull()
    assert report.refused == {
        "a.md/b.md": "the local path needs 'a.md' as a folder, where a file of that name is"
    }
    assert bob.read("a.md") == "my file\n"  # kept
    assert (await bob.engine.pull()).not_modified  # refused until it moves: a 304
    (bob.team_dir / "a.md").rename(bob.team_dir / "a-moved.md")
    assert (await bob.engine.pull()).pulled == ["a.md/b.md"]
    assert bob.read("a.md/b.md") == "under a folder\n"
