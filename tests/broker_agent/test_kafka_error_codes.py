"""The request metrics' walk for error codes (`metrics.error_codes`) finds every
error code other than NONE in a response mapping, however deep, and nothing else."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from broker_agent.kafka.metrics import error_codes

codes = st.sampled_from([0, 0, 3, 6, 7, 36, 41])
scalars = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.none(), st.booleans())
mappings = st.recursive(
    st.fixed_dictionaries({"error_code": codes}, optional={"name": st.text(max_size=3)}),
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(["topics", "partitions", "x"]), inner, max_size=3).map(
            dict
        ),
        st.builds(
            lambda d, c: {**d, "error_code": c},
            st.dictionaries(
                st.sampled_from(["topics", "partitions"]), st.lists(inner, max_size=3), max_size=2
            ),
            codes,
        ),
        st.lists(inner, max_size=3),
    ),
    max_leaves=12,
)


def reference(value: Any) -> Counter[int]:
    """What the walk must find, by plain recursion over every item."""
    found: Counter[int] = Counter()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code":
                found[int(item)] += 1
            else:
                found += reference(item)
    elif isinstance(value, list):
        for item in value:
            found += reference(item)
    found.pop(0, None)
    return found


@given(st.dictionaries(st.sampled_from(["topics", "responses"]), mappings, max_size=3), codes)
def test_it_finds_every_error_code_but_none(body: dict[str, Any], top: int) -> None:
    response = {"throttle_time": 0, "error_code": top, **body}
    assert Counter(error_codes(response)) == reference(response)


def test_lists_of_scalars_and_non_mappings_hold_no_codes() -> None:
    assert error_codes({"replica_nodes": [1, 2, 3], "error_code": 0}) == []
    assert error_codes("not a mapping") == []
    assert error_codes([]) == []
    topics = [{"name": "a", "error_code": 36, "partitions": [{"error_code": 6, "isr": [1]}]}]
    assert sorted(error_codes({"topics": topics, "error_code": 0})) == [6, 36]
