from quorum.raft.majority import majority_offset, majority_size


def test_majority_sizes() -> None:
    assert [majority_size(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_majority_offset_is_the_offset_a_majority_has_reached() -> None:
    assert majority_offset([10, 7, 3], 3) == 7
    assert majority_offset([10, 7, 3, 3, 1], 5) == 3


def test_voters_not_heard_from_count_as_zero() -> None:
    assert majority_offset([10], 3) == 0
    assert majority_offset([10, 4], 3) == 4
