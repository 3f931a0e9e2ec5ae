"""`quorumctl features`: what `kafka-features.sh` does (describe, upgrade)."""

from __future__ import annotations

import click

from quorum.cli.admin_calls import call_admin, fail_on_item_errors, item_error
from quorum.cli.bootstrap import (
    connection_options,
    parse_bootstrap,
    print_rows,
)
from quorum.cli.params import parse_int
from quorum.gen import admin_pb2 as api


@click.group("features")
def features_group() -> None:
    """Describe, upgrade and downgrade finalized feature levels (metadata.version).

    \b
    Example:
      quorumctl features describe
      quorumctl features upgrade --feature metadata.version=1
      quorumctl features upgrade --feature kraft.version=1
      quorumctl features downgrade --feature metadata.version=1 --dry-run
    """


@features_group.command("describe")
@connection_options
def describe(bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Finalized feature levels.

    \b
    Example:
      quorumctl features describe --output json
    """
    reply = call_admin(
        parse_bootstrap(bootstrap), cluster_id, "DescribeCluster", api.DescribeClusterRequest()
    )
    print_rows(feature_rows(reply), output)


def feature_rows(reply: api.DescribeClusterResponse) -> list[dict[str, object]]:
    """kafka-features.sh's columns: every supported feature with its range beside
    the finalized level (0: not finalized), and any finalized one this controller
    no longer supports (range -1)."""
    finalized = {f.name: f.level for f in reply.features}
    supported = {f.name: (f.min_level, f.max_level) for f in reply.supported_features}
    return [
        {
            "Feature": name,
            "SupportedMinVersion": supported.get(name, (-1, -1))[0],
            "SupportedMaxVersion": supported.get(name, (-1, -1))[1],
            "FinalizedVersionLevel": finalized.get(name, 0),
        }
        for name in sorted(set(finalized) | set(supported))
    ]


@features_group.command("upgrade")
@click.option("--feature", "features", multiple=True, required=True, metavar="NAME=LEVEL")
@click.option("--dry-run", is_flag=True, help="Validate only.")
@connection_options
def upgrade(
    features: tuple[str, ...], dry_run: bool, bootstrap: str | None, cluster_id: str, output: str
) -> None:
    """Raise feature levels (every registered broker must support the new level).

    kraft.version=1 moves static voters (controller.quorum.voters) into the log
    (KIP-853), after which controllers are added and removed with `quorumctl
    quorum add-controller` / `remove-controller`; every voter must be up and
    support it, and it is updated alone.

    \b
    Example:
      quorumctl features upgrade --feature metadata.version=1
      quorumctl features upgrade --feature kraft.version=1 --dry-run
    """
    _update_features(features, dry_run, bootstrap, cluster_id, output, downgrade=False)


@features_group.command("downgrade")
@click.option("--feature", "features", multiple=True, required=True, metavar="NAME=LEVEL")
@click.option("--dry-run", is_flag=True, help="Validate only.")
@connection_options
def downgrade(
    features: tuple[str, ...], dry_run: bool, bootstrap: str | None, cluster_id: str, output: str
) -> None:
    """Lower feature levels (kafka-features.sh downgrade); level 0 disables a feature.

    The controller refuses a level outside the supported range; nothing changes
    with --dry-run.

    \b
    Example:
      quorumctl features downgrade --feature metadata.version=1 --dry-run
    """
    _update_features(features, dry_run, bootstrap, cluster_id, output, downgrade=True)


def _update_features(
    features: tuple[str, ...],
    dry_run: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
    *,
    downgrade: bool,
) -> None:
    """One UpdateFeatures call for NAME=LEVEL pairs; a row per feature."""
    updates = []
    for pair in features:
        name, sep, level = pair.partition("=")
        try:
            # Level 0 removes a feature: a downgrade, never an upgrade.
            lowest = 0 if downgrade else 1
            number = parse_int(level, lowest) if sep and name else None
        except ValueError as err:
            raise click.BadParameter(f"{pair!r}: {err}", param_hint="--feature") from None
        if number is None:
            raise click.BadParameter(f"{pair!r} is not name=level", param_hint="--feature")
        updates.append(
            api.FeatureUpdate(feature=name, max_version_level=number, allow_downgrade=downgrade)
        )
    reply = call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "UpdateFeatures",
        api.UpdateFeaturesRequest(updates=updates, validate_only=dry_run),
    )
    failures = [(f"feature {r.feature}", m) for r in reply.results if (m := item_error(r.error))]
    fail_on_item_errors(failures)

    def result(level: int) -> str:
        if dry_run:
            return "valid"
        if not downgrade:
            return "upgraded"
        return "disabled" if level == 0 else "downgraded"

    rows = [
        {"Feature": u.feature, "Level": u.max_version_level, "Result": result(u.max_version_level)}
        for u in updates
    ]
    print_rows(rows, output)
