"""A deleted session folder's stand-in: its nearest existing folder in the same git work tree.
Standard library only (the hooks import it).

The daemon refuses a folder that does not exist, so a session whose folder was deleted under
it (`git worktree remove`, an `rm -rf build` the agent sat in) got no memory at all. Its
nearest existing ancestor stands in for it when that lies in a git work tree: outside git the
deleted folder was itself the project (its parent is another), and `/` or the home folder
(or a work tree rooted at either, a dotfiles repository) is no project.
"""

from __future__ import annotations

import os


def nearest_in_work_tree(cwd: str) -> str | None:
    """`cwd`'s nearest existing ancestor when `cwd` (absolute) is gone and that ancestor lies
    in a git work tree rooted below `/` and the home folder; None otherwise (`cwd` exists,
    or no such folder)."""
    if not cwd.startswith("/") or "\x00" in cwd or os.path.isdir(cwd):
        return None
    below = os.path.normpath(cwd)
    folder = os.path.dirname(below)
    while not os.path.isdir(folder):
        if folder == below:  # reached `/`
            return None
        below, folder = folder, os.path.dirname(folder)
    # The work tree is looked for from where the folder really is, as the daemon finds its
    # project: through a link (`build` -> /tmp/build, or a shell's `$PWD`) the folder's own
    # path may lie in another work tree, or in none.
    real = root = os.path.realpath(folder)
    while not os.path.lexists(os.path.join(root, ".git")):
        if os.path.dirname(root) == root:
            return None  # outside git: the project was the deleted folder itself
        root = os.path.dirname(root)
    if {real, root} & {"/", os.path.realpath(os.path.expanduser("~"))}:
        return None
    return folder
