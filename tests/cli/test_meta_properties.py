"""meta.properties: ids, formatting that never destroys, and reading that never guesses."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from quorum.common.meta_properties import (
    META_FILE,
    AlreadyFormattedError,
    MetaProperties,
    NodeIdMismatchError,
    NotFormattedError,
    StorageFormatError,
    check_directory,
    ensure_directory_id,
    format_directory,
    random_uuid,
    read_meta_properties,
    validate_cluster_id,
)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def non_canonical(text: str) -> str:
    """The same 16 bytes spelt differently: the last character carries 4 unused
    bits that decoders drop, so setting one gives a second spelling."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return text[:-1] + alphabet[alphabet.index(text[-1]) | 1]


def test_random_uuids_are_canonical_distinct_and_safe() -> None:
    ids = {random_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16 and b64(raw) == text
        assert int.from_bytes(raw, "big") >= 100
        validate_cluster_id(text)


def test_a_second_spelling_decodes_to_the_same_bytes() -> None:
    canonical = b64(bytes(range(1, 17)))
    validate_cluster_id(canonical)
    assert non_canonical(canonical) != canonical
    assert base64.urlsafe_b64decode(non_canonical(canonical) + "==") == bytes(range(1, 17))


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "short",
        b64(bytes(range(16))) + "A",  # 23 characters
        b64(bytes(range(16))) + "==",  # padded
        "AAAAAAAAAAAAAAAAAAAA+A",  # standard, not URL-safe, alphabet
        non_canonical(b64(bytes(range(1, 17)))),
        " " + b64(bytes(range(16)))[1:],
        b64(bytes(16)),  # Kafka's ZERO_UUID
        b64(bytes(15) + b"\x01"),  # Kafka's ONE_UUID (the metadata topic's id)
    ],
)
def test_invalid_cluster_ids_are_refused(bad: str) -> None:
    with pytest.raises(StorageFormatError, match="invalid cluster id"):
        validate_cluster_id(bad)


def test_format_then_read_and_check(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b" / "controller-3"
    cluster_id = random_uuid()
    assert format_directory(directory, MetaProperties(cluster_id, 3)) is True
    assert sorted(p.name for p in directory.iterdir()) == [META_FILE]  # no temp file left
    assert (directory / META_FILE).read_text().startswith("#")
    meta = read_meta_properties(directory)
    assert (meta.cluster_id, meta.node_id, meta.version) == (cluster_id, 3, 1)
    assert meta.directory_id is not None and len(meta.directory_id) == 22
    assert check_directory(directory, 3) == meta

    with pytest.raises(NodeIdMismatchError) as mismatch:
        check_directory(directory, 4)
    message = str(mismatch.value)
    assert "node.id 3" in message and "node.id 4" in message
    assert str(directory / META_FILE) in message


def test_a_given_directory_id_is_kept(tmp_path: Path) -> None:
    directory_id = random_uuid()
    format_directory(tmp_path, MetaProperties(random_uuid(), 0, directory_id=directory_id))
    assert read_meta_properties(tmp_path).directory_id == directory_id


def test_a_directory_without_an_id_gets_one_once(tmp_path: Path) -> None:
    """A directory formatted before directory ids: the first start writes one,
    every later start reads the same (KIP-858)."""
    cluster_id = random_uuid()
    (tmp_path / META_FILE).write_text(f"version=1\ncluster.id={cluster_id}\nnode.id=7\n")
    meta = ensure_directory_id(tmp_path, read_meta_properties(tmp_path))
    assert meta.directory_id is not None and len(meta.directory_id) == 22
    again = read_meta_properties(tmp_path)
    assert again == meta and (again.cluster_id, again.node_id) == (cluster_id, 7)
    assert ensure_directory_id(tmp_path, again) == meta
    assert sorted(p.name for p in tmp_path.iterdir()) == [META_FILE]


def test_a_reserved_directory_id_is_never_formatted(tmp_path: Path) -> None:
    with pytest.raises(StorageFormatError, match="reserved"):
        format_directory(tmp_path, MetaProperties(random_uuid(), 0, directory_id="A" * 22))
    assert not (tmp_path / META_FILE).exists()


def test_formatting_never_overwrites(tmp_path: Path) -> None:
    cluster_id = random_uuid()
    format_directory(tmp_path, MetaProperties(cluster_id, 1))
    before = (tmp_path / META_FILE).read_bytes()
    for meta in (MetaProperties(cluster_id, 1), MetaProperties(random_uuid(), 2)):
        with pytest.raises(AlreadyFormattedError, match="already formatted"):
            format_directory(tmp_path, meta)
    assert format_directory(tmp_path, MetaProperties(cluster_id, 1), ignore_formatted=True) is False
    with pytest.raises(AlreadyFormattedError, match="another identity"):
        format_directory(tmp_path, MetaProperties(cluster_id, 2), ignore_formatted=True)
    assert (tmp_path / META_FILE).read_bytes() == before

    (tmp_path / META_FILE).write_text("garbage\n")
    with pytest.raises(AlreadyFormattedError, match="unusable"):
        format_directory(tmp_path, MetaProperties(cluster_id, 1), ignore_formatted=True)
    assert (tmp_path / META_FILE).read_text() == "garbage\n"


def test_format_refuses_what_it_cannot_vouch_for(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(b"records")
    with pytest.raises(StorageFormatError, match=r"not empty \(00000000000000000000\.log\)"):
        format_directory(tmp_path, MetaProperties(random_uuid(), 1))
    assert not (tmp_path / META_FILE).exists()

    mount_point = tmp_path / "disk"
    (mount_point / "lost+found").mkdir(parents=True)
    assert format_directory(mount_point, MetaProperties(random_uuid(), 1))

    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(StorageFormatError, match="not a directory"):
        format_directory(a_file, MetaProperties(random_uuid(), 1))

    with pytest.raises(StorageFormatError, match="invalid cluster id"):
        format_directory(tmp_path / "new", MetaProperties("nope", 1))
    with pytest.raises(StorageFormatError, match=r"node\.id -1"):
        format_directory(tmp_path / "new", MetaProperties(random_uuid(), -1))
    assert not (tmp_path / "new").exists()


def test_not_formatted(tmp_path: Path) -> None:
    for directory in (tmp_path, tmp_path / "missing"):
        with pytest.raises(NotFormattedError) as info:
            read_meta_properties(directory)
        assert str(directory) in str(info.value)
        assert "quorumctl storage format" in str(info.value)
    with pytest.raises(NotFormattedError):
        check_directory(tmp_path, 1)


GOOD_ID = b64(bytes(range(1, 17)))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("version=1\nnode.id=3\n", "has no cluster.id"),
        (f"cluster.id={GOOD_ID}\nnode.id=3\n", "has no version"),
        (f"version=1\ncluster.id={GOOD_ID}\n", "has no node.id"),
        (f"version=0\ncluster.id={GOOD_ID}\nnode.id=3\n", "version 0"),
        (f"version=9\ncluster.id={GOOD_ID}\nnode.id=3\n", "version 9"),
        (f"version=one\ncluster.id={GOOD_ID}\nnode.id=3\n", "version='one'"),
        (f"version=1\ncluster.id={GOOD_ID}\nnode.id=-3\n", "node.id='-3'"),
        ("version=1\ncluster.id=abc\nnode.id=3\n", "invalid cluster id"),
        (f"version=1\ncluster.id={GOOD_ID}\nnode.id=3\ndirectory.id=x\n", "directory.id"),
        (f"version=1\ncluster.id={GOOD_ID}\nnode.id=3\ndirectory.id={'A' * 22}\n", "reserved"),
        ("version=1\\uZZZZ\n", "not a properties file"),
    ],
)
def test_a_corrupt_file_is_refused_naming_it(tmp_path: Path, content: str, says: str) -> None:
    (tmp_path / META_FILE).write_text(content)
    with pytest.raises(StorageFormatError) as info:
        read_meta_properties(tmp_path)
    assert not isinstance(info.value, NotFormattedError)
    assert str(tmp_path / META_FILE) in str(info.value)
    assert says in str(info.value)


def test_undecodable_bytes_are_refused(tmp_path: Path) -> None:
    (tmp_path / META_FILE).write_bytes(b"version=1\ncluster.id=\xff\xfe\n")
    with pytest.raises(StorageFormatError, match="not a properties file"):
        read_meta_properties(tmp_path)


def test_errors_share_one_base() -> None:
    for cls in (NotFormattedError, NodeIdMismatchError, AlreadyFormattedError):
        assert issubclass(cls, StorageFormatError)
