"""The metadata shell completes paths with Tab and lists no "Undocumented
commands: EOF" in its help. The shell's own completion hooks, as readline calls
them (text: the word after readline's last delimiter, line and cursor)."""

from __future__ import annotations

import io

from quorum.cli.shell import Leaf, MetadataShell

TREE = {
    "topics": {
        "orders": {"id": Leaf(topic_id="x"), "partitions": {"0": Leaf(leader=1)}},
        "orders-eu": {"id": Leaf(topic_id="y"), "partitions": {}},
        "payments": {"id": Leaf(topic_id="z"), "partitions": {}},
    },
    "brokers": {"101": Leaf(broker_id=101)},
    "features": Leaf(),
}


def shell() -> MetadataShell:
    s = MetadataShell(TREE, 42, interactive=False)
    s.stdout = io.StringIO()
    return s


def complete(s: MetadataShell, line: str, text: str) -> list[str]:
    return s.complete_path(text, line, len(line) - len(text), len(line))


def test_paths_complete_from_the_root_and_the_current_directory() -> None:
    s = shell()
    assert complete(s, "ls ", "") == ["topics/", "brokers/", "features"]
    assert complete(s, "cd /to", "to") == ["topics/"]
    assert sorted(complete(s, "cat /topics/or", "or")) == ["orders-eu/", "orders/"]
    s.onecmd("cd /topics")
    assert complete(s, "ls pay", "pay") == ["payments/"]
    assert complete(s, "tree orders/pa", "pa") == ["partitions/"]
    assert complete(s, "cat ../br", "br") == ["brokers/"]


def test_a_word_split_at_a_dash_completes_only_its_tail() -> None:
    # readline treats '-' as a delimiter: for "orders-e" it passes text "e".
    assert complete(shell(), "ls /topics/orders-e", "e") == ["eu/"]


def test_nothing_completes_below_a_record_or_a_missing_path() -> None:
    s = shell()
    assert complete(s, "cat /features/x", "x") == []
    assert complete(s, "ls /nowhere/x", "x") == []


def test_help_lists_no_undocumented_eof() -> None:
    s = shell()
    s.onecmd("help")
    text = s.stdout.getvalue()  # type: ignore[attr-defined]
    assert "Undocumented" not in text and "EOF" not in text
    assert "ls" in text and "tree" in text
