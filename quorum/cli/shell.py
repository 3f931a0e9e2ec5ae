"""`quorumctl metadata shell`: browse the metadata image as it stood at any offset.

The image is rebuilt offline from a data directory (the newest snapshot at or
below `--at-offset`, then the log) and shown as a file tree:

    /brokers/<id>                      a registration
    /topics/<name>/id, config, partitions/<p>
    /configs/topic|broker|cluster/<name>
    /acls/<id>
    /features, /producer_ids

Commands: ls, cd, pwd, cat, find, tree, help, exit, with Tab completing paths
(readline, through the standard library's `cmd`: the shell needs nothing
prompt-toolkit or cmd2 would add). It reads commands from a terminal with a
prompt, or from a pipe without one (for scripts). Note: offline,
the tool cannot know the high watermark, so a log tail that was never committed
(a leader's last appends before it crashed) is shown too.
"""

from __future__ import annotations

import cmd
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from quorum.cli.data_dir import image_at, partition_dir
from quorum.cli.log_tools import dir_option
from quorum.controller.metadata_image import MetadataImage

Tree = dict[str, Any]


class Leaf(dict[str, Any]):
    """A record: shown by `cat`, not entered by `cd`."""


RESOURCE_DIRS = {2: "topic", 4: "broker", 16: "cluster"}


def image_tree(image: MetadataImage) -> Tree:
    topics: Tree = {}
    for topic in sorted(image.topics_by_id.values(), key=lambda t: t.name):
        topics[topic.name] = {
            "id": Leaf(topic_id=topic.topic_id, name=topic.name),
            "config": Leaf(sorted(image.configs.get((2, topic.name), {}).items())),
            "partitions": {str(p): Leaf(asdict(s)) for p, s in sorted(topic.partitions.items())},
        }
    configs: Tree = {kind: {} for kind in RESOURCE_DIRS.values()}
    for (rtype, name), entries in sorted(image.configs.items()):
        configs[RESOURCE_DIRS.get(rtype, str(rtype))][name or "<default>"] = Leaf(entries)
    owner, next_id = image.producer_id_owner, image.next_producer_id
    return {
        "brokers": {str(b): Leaf(asdict(image.brokers[b])) for b in sorted(image.brokers)},
        "topics": topics,
        "configs": configs,
        "acls": {a.acl_id: Leaf(asdict(a)) for a in image.acls.values()},
        "features": Leaf(sorted(image.features.items())),
        "producer_ids": Leaf(owner=list(owner), next_producer_id=next_id),
    }


class MetadataShell(cmd.Cmd):
    intro = "Metadata shell: ls, cd, pwd, cat, find, tree, help, exit."

    def __init__(self, tree: Tree, offset: int, interactive: bool) -> None:
        super().__init__()
        self.tree = tree
        self.offset = offset
        self.cwd: list[str] = []
        self.interactive = interactive
        if not interactive:
            self.intro = ""
        self._update_prompt()

    def _update_prompt(self) -> None:
        self.prompt = (
            f"[metadata@{self.offset} /{'/'.join(self.cwd)}]> " if self.interactive else ""
        )

    # ------------------------------------------------------------- paths

    def _resolve(self, arg: str) -> list[str]:
        parts = [] if arg.startswith("/") else list(self.cwd)
        for piece in arg.split("/"):
            if piece in ("", "."):
                continue
            if piece == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(piece)
        return parts

    def _node(self, parts: list[str]) -> Any:
        node: Any = self.tree
        for piece in parts:
            if not isinstance(node, dict) or piece not in node:
                raise KeyError("/" + "/".join(parts))
            node = node[piece]
        return node

    def _lookup(self, arg: str) -> tuple[list[str], Any] | None:
        parts = self._resolve(arg)
        try:
            return parts, self._node(parts)
        except KeyError as err:
            self.stdout.write(f"no such path: {err.args[0]}\n")
            return None

    # ---------------------------------------------------------- commands

    def do_ls(self, arg: str) -> None:
        """ls [path]: the entries of a directory."""
        found = self._lookup(arg)
        if found is None:
            return
        _, node = found
        if isinstance(node, dict):
            for key, value in node.items():
                self.stdout.write(f"{key}/\n" if _is_dir(value) else f"{key}\n")
        else:
            self.stdout.write(f"{arg}\n")

    def do_cd(self, arg: str) -> None:
        """cd [path]: change directory (no path: the root)."""
        found = self._lookup(arg or "/")
        if found is None:
            return
        parts, node = found
        if not _is_dir(node):
            self.stdout.write(f"not a directory: /{'/'.join(parts)}\n")
            return
        self.cwd = parts
        self._update_prompt()

    def do_pwd(self, arg: str) -> None:
        """pwd: the current directory."""
        self.stdout.write("/" + "/".join(self.cwd) + "\n")

    def do_cat(self, arg: str) -> None:
        """cat path: a node as JSON."""
        found = self._lookup(arg)
        if found is not None:
            self.stdout.write(json.dumps(found[1], indent=2) + "\n")

    def do_find(self, arg: str) -> None:
        """find [path]: every path below."""
        found = self._lookup(arg)
        if found is not None:
            for path in _walk(found[1], "/" + "/".join(found[0])):
                self.stdout.write(path + "\n")

    def do_tree(self, arg: str) -> None:
        """tree [path]: the directories below, indented."""
        found = self._lookup(arg)
        if found is not None:
            self.stdout.write("/" + "/".join(found[0]) + "\n")
            _print_tree(found[1], "  ", self.stdout.write)

    def do_exit(self, arg: str) -> bool:
        """exit: leave the shell."""
        return True

    do_quit = do_exit

    def do_EOF(self, arg: str) -> bool:  # cmd calls this at end of input
        if self.interactive:
            self.stdout.write("\n")
        return True

    def get_names(self) -> list[str]:
        """`help` lists what a user types; EOF (Ctrl-D) is how input ends, not a
        command, so it is not listed (cmd would show "Undocumented commands: EOF")."""
        return [name for name in super().get_names() if name != "do_EOF"]

    # ------------------------------------------------------- completion

    def complete_path(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        """Tab completion of the path being typed (readline, as in a Unix shell):
        the entries of its directory that start with what is typed, directories
        with a trailing `/`. readline splits words at `/` and `-`, so `text` is
        only the tail of the path; the answers replace just that tail."""
        typed = line[:endidx].split(" ", 1)[1] if " " in line[:endidx] else ""
        head, slash, partial = typed.rpartition("/")
        try:
            node = self._node(self._resolve((head + slash) or "."))
        except KeyError:
            return []
        if not _is_dir(node):
            return []
        cut = len(partial) - len(text)
        return [
            (key + ("/" if _is_dir(value) else ""))[cut:]
            for key, value in node.items()
            if key.startswith(partial)
        ]

    complete_ls = complete_cd = complete_cat = complete_find = complete_tree = complete_path

    def default(self, line: str) -> None:
        self.stdout.write(f"unknown command: {line.split()[0]} (try help)\n")

    def emptyline(self) -> bool:
        return False


def _is_dir(node: Any) -> bool:
    return isinstance(node, dict) and not isinstance(node, Leaf)


def _walk(node: Any, path: str) -> list[str]:
    out = [path or "/"]
    if _is_dir(node):
        for key, value in node.items():
            out += _walk(value, f"{path.rstrip('/')}/{key}")
    return out


def _print_tree(node: Any, indent: str, write: Any) -> None:
    if not _is_dir(node):
        return
    for key, value in node.items():
        write(f"{indent}{key}{'/' if _is_dir(value) else ''}\n")
        _print_tree(value, indent + "  ", write)


@click.group("metadata")
def metadata_group() -> None:
    """Browse the metadata image offline.

    \b
    Example:
      quorumctl metadata shell --dir data/controller-1 --at-offset 500
    """


@metadata_group.command("shell")
@dir_option
@click.option("--at-offset", type=click.IntRange(min=0), help="The image below this offset.")
def shell(directory: Path, at_offset: int | None) -> None:
    """An interactive shell (ls, cd, cat, find, tree) over the image at an offset.

    \b
    Example:
      quorumctl metadata shell --dir data/controller-1
      echo 'ls /topics' | quorumctl metadata shell --dir data/controller-1 --at-offset 40
    """
    image = image_at(partition_dir(directory), at_offset)
    interactive = sys.stdin.isatty()
    MetadataShell(image_tree(image), image.applied_offset, interactive).cmdloop()
