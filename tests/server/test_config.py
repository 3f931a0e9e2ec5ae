"""Controller configuration: every field, the defaults, and every refusal.

Each refusal is checked for the key it blames (`err.key`) and for a message
that names that key, since an operator only sees the message.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import javaproperties
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quorum.controller.request_limits import PROPERTIES as LIMIT_PROPERTIES
from quorum.controller_config import (
    INT_KEYS,
    KAFKA_KEYS,
    KNOWN_KEYS,
    OUR_KEYS,
    ConfigError,
    ControllerConfig,
    Endpoint,
    int_key_table,
    load_config,
    parse_config,
    render_properties,
)

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
BASE = {
    "node.id": "2",
    "process.roles": "controller",
    "controller.quorum.voters": VOTERS,
    "listeners": "CONTROLLER://127.0.0.1:9094",
    "metadata.log.dir": "/var/lib/quorum/controller-2",
}

FULL_FILE = """\
# a controller with every key set
node.id=2
process.roles=controller
controller.quorum.voters=1@ctl-1.example.com:9093,2@ctl-2.example.com:9093,3@[::1]:9095
listeners=CONTROLLER://0.0.0.0:9093
controller.listener.names=CONTROLLER
metadata.log.dir=/var/lib/quorum/meta
controller.quorum.election.timeout.ms=300
controller.quorum.fetch.timeout.ms=900
controller.quorum.election.backoff.max.ms=150
controller.quorum.request.timeout.ms=1500
controller.quorum.retry.backoff.ms=5
controller.quorum.fetch.max.wait.ms=200
metrics.listener=http://127.0.0.1:9193
metadata.log.segment.bytes=65536
metadata.log.segment.ms=1000
metadata.max.retention.bytes=-1
metadata.max.retention.ms=60000
metadata.snapshot.max.new.record.bytes=4096
metadata.snapshot.max.interval.ms=0
metadata.snapshot.retain.count=5
log.level=debug
"""


def props(**changes: str | None) -> dict[str, str]:
    """BASE with changes; `a__b` stands for key `a.b`, None removes the key."""
    out = dict(BASE)
    for name, value in changes.items():
        key = name.replace("__", ".")
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def refused(properties: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(properties)
    return info.value


def test_a_full_file_sets_every_field(tmp_path: Path) -> None:
    path = tmp_path / "controller-2.properties"
    path.write_text(FULL_FILE)
    config = load_config(path)
    assert config == ControllerConfig(
        node_id=2,
        process_roles=("controller",),
        voters={
            1: Endpoint("ctl-1.example.com", 9093),
            2: Endpoint("ctl-2.example.com", 9093),
            3: Endpoint("::1", 9095),
        },
        listener=Endpoint("0.0.0.0", 9093),
        advertised=Endpoint("ctl-2.example.com", 9093),
        metadata_log_dir=Path("/var/lib/quorum/meta"),
        election_timeout_ms=300,
        fetch_timeout_ms=900,
        election_backoff_max_ms=150,
        request_timeout_ms=1500,
        retry_backoff_ms=5,
        fetch_max_wait_ms=200,
        metrics_listener=Endpoint("127.0.0.1", 9193),
        log_segment_bytes=65536,
        log_segment_ms=1000,
        max_retention_bytes=-1,
        max_retention_ms=60000,
        snapshot_max_new_record_bytes=4096,
        snapshot_max_interval_ms=0,
        snapshot_retain_count=5,
        log_level="DEBUG",
        source=path,
    )
    assert config.is_voter
    assert config.voters[3].address() == "[::1]:9095"
    assert config.advertised.address() == "ctl-2.example.com:9093"


def test_defaults_are_kafkas() -> None:
    config = parse_config(BASE)
    assert config.node_id == 2 and config.process_roles == ("controller",)
    assert config.listener == config.advertised == Endpoint("127.0.0.1", 9094)
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (1000, 2000)
    assert (config.election_backoff_max_ms, config.request_timeout_ms) == (1000, 2000)
    assert (config.retry_backoff_ms, config.fetch_max_wait_ms) == (20, 500)
    assert (config.log_segment_bytes, config.log_segment_ms) == (1073741824, 604800000)
    assert (config.max_retention_bytes, config.max_retention_ms) == (104857600, 604800000)
    assert config.snapshot_max_new_record_bytes == 20971520
    assert config.snapshot_max_interval_ms == 3600000
    assert config.snapshot_retain_count == 2
    assert config.max_epoch_jump == 10000 and config.voter_principals == {}
    assert (config.metrics_sample_window_ms, config.metrics_num_samples) == (30000, 2)
    assert config.metrics_listener is None
    assert config.log_level == "INFO"
    assert config.source is None


def test_known_keys_are_split_into_kafkas_and_ours() -> None:
    assert set(KAFKA_KEYS).isdisjoint(OUR_KEYS)
    assert set(OUR_KEYS) == {
        "controller.quorum.fetch.max.wait.ms",
        "metrics.listener",
        "metrics.listener.ssl.client.auth",
        "metadata.snapshot.retain.count",
        "log.level",
        "admin.request.rate.per.client",
        "admin.request.burst.per.client",
        "controller.quorum.max.epoch.jump",
        "controller.quorum.voter.principals",
    }
    assert len(KNOWN_KEYS) == len(set(KNOWN_KEYS)) == 38 + len(LIMIT_PROPERTIES)  # 5 TLS, 3 auth


def test_as_properties_lists_every_key_and_parses_back_equal() -> None:
    config = parse_config(props(metrics__listener="http://127.0.0.1:9193"))
    effective = config.as_properties()
    assert set(effective) == set(KNOWN_KEYS)
    assert effective["controller.quorum.fetch.timeout.ms"] == "2000"
    assert effective["controller.quorum.voters"] == VOTERS
    assert parse_config(effective) == config
    unset = parse_config(BASE).as_properties()
    assert unset["metrics.listener"] == ""
    assert parse_config(unset).metrics_listener is None


def test_unknown_key_suggests_the_closest_known_one() -> None:
    error = refused(props(controller__quorum__election__timout__ms="5"))
    assert error.key == "controller.quorum.election.timout.ms"
    assert str(error) == (
        "unknown property 'controller.quorum.election.timout.ms' "
        "(did you mean controller.quorum.election.timeout.ms?)"
    )
    far = refused({**BASE, "zookeeper.connect": "localhost:2181"})
    assert far.key == "zookeeper.connect"
    assert str(far) == "unknown property 'zookeeper.connect'"


@pytest.mark.parametrize(
    ("changes", "key", "says"),
    [
        # node.id
        ({"node__id": None}, "node.id", "required"),
        ({"node__id": "two"}, "node.id", "integer"),
        ({"node__id": "1_0"}, "node.id", "integer"),
        ({"node__id": ""}, "node.id", "integer"),
        ({"node__id": "-1"}, "node.id", "at least 0"),
        ({"node__id": "2147483648"}, "node.id", "at most"),
        # process.roles
        ({"process__roles": None}, "process.roles", "required"),
        ({"process__roles": "zookeeper"}, "process.roles", "unknown role"),
        ({"process__roles": "broker,controller"}, "process.roles", "combined"),
        ({"process__roles": "controller,broker"}, "process.roles", "combined"),
        ({"process__roles": "controller,controller"}, "process.roles", "twice"),
        # controller.quorum.voters
        ({"controller__quorum__voters": None}, "controller.quorum.voters", "required"),
        ({"controller__quorum__voters": "127.0.0.1:9093"}, "controller.quorum.voters", "id@"),
        ({"controller__quorum__voters": "x@a:1"}, "controller.quorum.voters", "node id"),
        ({"controller__quorum__voters": "-1@a:1"}, "controller.quorum.voters", "node id"),
        (
            {"controller__quorum__voters": "1@127.0.0.1:9093,2@127.0.0.1"},
            "controller.quorum.voters",
            "not host:port",
        ),
        (
            {"controller__quorum__voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,"},
            "controller.quorum.voters",
            "not id@host:port",
        ),
        ({"controller__quorum__voters": "2@h:99999"}, "controller.quorum.voters", "port"),
        ({"controller__quorum__voters": "2@h:0"}, "controller.quorum.voters", "port"),
        ({"controller__quorum__voters": "2@h:http"}, "controller.quorum.voters", "port"),
        ({"controller__quorum__voters": "2@:9094"}, "controller.quorum.voters", "host"),
        ({"controller__quorum__voters": "2@a b:9094"}, "controller.quorum.voters", "host"),
        ({"controller__quorum__voters": "2@::1:9094"}, "controller.quorum.voters", "brackets"),
        ({"controller__quorum__voters": "2@[zz::1]:9094"}, "controller.quorum.voters", "IPv6"),
        (
            {"controller__quorum__voters": "1@a:9093,2@b:9094,1@c:9095"},
            "controller.quorum.voters",
            "node 1 appears twice",
        ),
        (
            {"controller__quorum__voters": "1@Host:9094,2@host:9094"},
            "controller.quorum.voters",
            "share the address",
        ),
        # listeners
        ({"listeners": None}, "listeners", "required"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9094"}, "listeners", "no CONTROLLER listener"),
        ({"listeners": "127.0.0.1:9094"}, "listeners", "NAME://host:port"),
        (
            {"listeners": "CONTROLLER://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095"},
            "listeners",
            "twice",
        ),
        ({"listeners": "CONTROLLER://127.0.0.1:9999"}, "listeners", "9094"),
        ({"controller__listener__names": "CTRL"}, "listeners", "no CTRL listener"),
        # metadata.log.dir
        ({"metadata__log__dir": None}, "metadata.log.dir", "required"),
        ({"metadata__log__dir": ""}, "metadata.log.dir", "required"),
        # integers
        (
            {"controller__quorum__election__timeout__ms": "0"},
            "controller.quorum.election.timeout.ms",
            "at least 1",
        ),
        (
            {"controller__quorum__retry__backoff__ms": "-5"},
            "controller.quorum.retry.backoff.ms",
            "at least 0",
        ),
        (
            {"controller__quorum__request__timeout__ms": "2s"},
            "controller.quorum.request.timeout.ms",
            "integer",
        ),
        ({"metadata__log__segment__bytes": "8191"}, "metadata.log.segment.bytes", "8192"),
        ({"metadata__log__segment__bytes": "4294967296"}, "metadata.log.segment.bytes", "most"),
        ({"metadata__max__retention__bytes": "-2"}, "metadata.max.retention.bytes", "-1"),
        ({"metadata__max__retention__ms": "-2"}, "metadata.max.retention.ms", "-1"),
        (
            {"metadata__snapshot__max__interval__ms": "-1"},
            "metadata.snapshot.max.interval.ms",
            "at least 0",
        ),
        (
            {"metadata__snapshot__retain__count": "0"},
            "metadata.snapshot.retain.count",
            "at least 1",
        ),
        # timeouts that contradict each other
        (
            {"controller__quorum__election__timeout__ms": "2001"},
            "controller.quorum.election.timeout.ms",
            "larger than controller.quorum.fetch.timeout.ms",
        ),
        (
            {"controller__quorum__fetch__max__wait__ms": "2000"},
            "controller.quorum.fetch.max.wait.ms",
            "below controller.quorum.request.timeout.ms",
        ),
        (
            {
                "controller__quorum__fetch__max__wait__ms": "900",
                "controller__quorum__election__timeout__ms": "500",
                "controller__quorum__fetch__timeout__ms": "800",
            },
            "controller.quorum.fetch.max.wait.ms",
            "below controller.quorum.fetch.timeout.ms",
        ),
        # roles against voters
        ({"node__id": "7"}, "node.id", "a controller must be a voter"),
        ({"process__roles": "broker"}, "process.roles", "a voter must be a controller"),
        (
            {
                "node__id": "4",
                "process__roles": "broker",
                "listeners": "CONTROLLER://127.0.0.1:9093",
            },
            "listeners",
            "voter 1",
        ),
        # ours
        ({"metrics__listener": "127.0.0.1:9193"}, "metrics.listener", "http://host:port"),
        ({"metrics__listener": "https://127.0.0.1:9193"}, "metrics.listener", "certificate"),
        ({"metrics__listener": "tcp://127.0.0.1:9193"}, "metrics.listener", "http://"),
        ({"metrics__listener": "http://127.0.0.1:x"}, "metrics.listener", "port"),
        ({"metrics__listener": "http://127.0.0.1:9094"}, "metrics.listener", "9094"),
        ({"log__level": "LOUD"}, "log.level", "one of"),
    ],
)
def test_refusals_name_the_key(changes: dict[str, str | None], key: str, says: str) -> None:
    error = refused(props(**changes))
    assert error.key == key
    assert key in str(error)
    assert says in str(error)


def test_a_controller_outside_the_voters_is_pointed_at_observers() -> None:
    message = str(refused(props(node__id="7")))
    assert "node.id 7" in message and "process.roles=broker" in message


def test_an_observer_is_a_broker_outside_the_voters() -> None:
    config = parse_config(
        props(node__id="4", process__roles="broker", listeners="CONTROLLER://127.0.0.1:9096")
    )
    assert config.process_roles == ("broker",)
    assert not config.is_voter
    assert config.advertised == config.listener == Endpoint("127.0.0.1", 9096)
    assert sorted(config.voters) == [1, 2, 3]


def test_listener_forms() -> None:
    everywhere = parse_config(props(listeners="CONTROLLER://:9094"))
    assert everywhere.listener == Endpoint("0.0.0.0", 9094)
    assert everywhere.advertised == Endpoint("127.0.0.1", 9094)

    named = parse_config(
        props(
            controller__listener__names="ctrl,CONTROLLER",
            listeners="PLAINTEXT://127.0.0.1:9092, CTRL://127.0.0.1:9094",
        )
    )
    assert named.listener == Endpoint("127.0.0.1", 9094)

    ipv6 = parse_config(
        props(
            controller__quorum__voters="1@[::1]:9093,2@[::1]:9094",
            listeners="CONTROLLER://[::1]:9094",
        )
    )
    assert ipv6.listener.address() == "[::1]:9094"
    assert ipv6.voters[1] == Endpoint("::1", 9093)


def test_values_are_trimmed_and_levels_take_log4j_names() -> None:
    config = parse_config(props(node__id=" 2 ", log__level="warn"))
    assert config.node_id == 2
    assert config.log_level == "WARNING"
    assert parse_config(props(log__level="fatal")).log_level == "CRITICAL"
    assert parse_config(props(metrics__listener="")).metrics_listener is None
    assert parse_config(props(metrics__listener="http://:9193/")).metrics_listener == Endpoint(
        "0.0.0.0", 9193
    )


def test_a_key_set_twice_in_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text(render_properties(BASE) + "node.id=3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "node.id"
    assert "set twice" in str(info.value) and "lines 1 and 6" in str(info.value)


def test_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        load_config(tmp_path / "nope.properties")
    assert missing.value.key == "config"
    assert "nope.properties" in str(missing.value)

    with pytest.raises(ConfigError) as directory:
        load_config(tmp_path)
    assert directory.value.key == "config"

    binary = tmp_path / "binary.properties"
    binary.write_bytes(b"node.id=\xff\xfe\n")
    with pytest.raises(ConfigError) as undecodable:
        load_config(binary)
    assert undecodable.value.key == "config"


def test_render_and_load_round_trip(tmp_path: Path) -> None:
    original = props(
        metrics__listener="http://127.0.0.1:9193", metadata__log__dir=str(tmp_path / "my dir")
    )
    text = render_properties(original, header="controller 2\nwritten by a test")
    assert text.startswith("# controller 2\n# written by a test\n")
    assert f"controller.quorum.voters={VOTERS}\n" in text  # colons left readable
    path = tmp_path / "controller-2.properties"
    path.write_text(text)
    config = load_config(path)
    assert config.source == path
    assert config.metadata_log_dir == tmp_path / "my dir"
    assert config == parse_config(original, source=path)

    effective = tmp_path / "effective.properties"
    effective.write_text(render_properties(config.as_properties()))
    assert load_config(effective).as_properties() == config.as_properties()


@settings(max_examples=200, deadline=None)
@example({"lead": " x", "tab": "\tx", "feed": "\fx", "lines": "a\\b\nc\rd", "ctl": "\x00\x7f"})
@example({"#key": "!value", "k=y": "v:w", "a b": "= c"})
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda k: k.strip() == k),
        st.text(max_size=20),
        max_size=5,
    )
)
def test_render_properties_escapes_whatever_would_change_on_reading(
    values: dict[str, str],
) -> None:
    assert javaproperties.loads(render_properties(values, header="any\nheader")) == values


def test_every_integer_key_fills_a_config_field_and_the_readme_shows_the_table() -> None:
    """Adding a key is one line in INT_KEYS: this catches the field or docs it needs."""
    fields = {f.name for f in dataclasses.fields(ControllerConfig)}
    assert [k.field for k in INT_KEYS if k.field not in fields] == []
    assert len({k.name for k in INT_KEYS}) == len(INT_KEYS)
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert int_key_table() in readme
    defaults = parse_config(
        {
            "node.id": "1",
            "process.roles": "controller",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "CONTROLLER://127.0.0.1:9093",
            "metadata.log.dir": "/tmp/x",
        }
    )
    assert all(getattr(defaults, k.field) == k.default for k in INT_KEYS)


def test_voter_principals_bind_voters_to_certificate_subjects() -> None:
    raw = "1@User:CN=ctl-a,O=Acme;3@User:CN=ctl-c"
    config = parse_config(props(controller__quorum__voter__principals=raw))
    assert config.voter_principals == {1: "User:CN=ctl-a,O=Acme", 3: "User:CN=ctl-c"}
    assert parse_config(config.as_properties()) == config
    for bad, why in [
        ("1@CN=ctl-a", "a principal is User:<subject>"),
        ("7@User:CN=x", "node 7 is not in controller.quorum.voters"),
        ("1@User:CN=a;1@User:CN=b", "node 1 appears twice"),
        ("one@User:CN=a", "is not id@User:subject"),
    ]:
        error = refused(props(controller__quorum__voter__principals=bad))
        assert error.key == "controller.quorum.voter.principals"
        assert why in str(error)
