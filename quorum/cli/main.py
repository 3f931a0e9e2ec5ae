"""`quorumctl`: the entry point that gathers the command groups.

Each group lives in its own module and is attached here with
``cli.add_command(...)``, so a new group touches one import and one line.

Exit codes: 0 on success, 1 when a request or operation fails (the reason on
stderr, no traceback), 2 on usage errors (click's convention).
"""

from __future__ import annotations

import sys

import click
import grpc

from quorum.cli.acls import acls_group
from quorum.cli.brokers import brokers_group
from quorum.cli.cleaner import cleaner_command
from quorum.cli.configs import configs_group
from quorum.cli.elect_leaders import elect_leaders
from quorum.cli.endpoints import endpoint_group, rpc_failure
from quorum.cli.features import features_group
from quorum.cli.lazy_group import LazyGroup
from quorum.cli.log_tools import log_group
from quorum.cli.quorum_describe import quorum_group
from quorum.cli.quorum_membership import add_controller, remove_controller
from quorum.cli.shell import metadata_group
from quorum.cli.snapshot_cmds import snapshot_group
from quorum.cli.storage import storage
from quorum.cli.storage_recovery import force_standalone
from quorum.cli.topics import topics_group
from quorum.common.version import DISTRIBUTION, product_version

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@click.group(
    cls=LazyGroup,
    lazy_commands={"groups": "quorum.cli.groups:groups_group"},
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(
    product_version(), "--version", "-V", message=f"%(prog)s %(version)s ({DISTRIBUTION})"
)
def cli() -> None:
    """Administer a KRaft-style metadata quorum.

    \b
    Example:
      quorumctl storage format --cluster-id "$(quorumctl storage random-uuid)" \\
          --config data/config/controller-1.properties

    \b
    Shell completion (bash; use zsh_source or fish_source for those shells):
      eval "$(_QUORUMCTL_COMPLETE=bash_source quorumctl)"
    """


cli.add_command(storage)
assert storage.commands["force-standalone"] is force_standalone  # registered on import
cli.add_command(quorum_group)
assert quorum_group.commands["add-controller"] is add_controller  # registered on import
assert quorum_group.commands["remove-controller"] is remove_controller
cli.add_command(endpoint_group)
cli.add_command(topics_group)
topics_group.add_command(cleaner_command)
cli.add_command(configs_group)
cli.add_command(acls_group)
cli.add_command(brokers_group)
cli.add_command(elect_leaders)
cli.add_command(features_group)
cli.add_command(log_group)
cli.add_command(snapshot_group)
cli.add_command(metadata_group)


def main(argv: list[str] | None = None) -> int:
    """Run `quorumctl` with `argv` (default: the command line); return the exit code.

    Click runs in standalone mode, so it reports usage errors, failures, Ctrl-C
    and a closed stdout pipe the way users expect; its final `sys.exit` is
    turned into a return value so the function can also be called in-process.
    """
    try:
        cli.main(args=argv, prog_name="quorumctl")
    except grpc.RpcError as err:
        # A call no command mapped: still one line, never gRPC's debug dump.
        print(f"quorumctl: {rpc_failure('the controller', err)}", file=sys.stderr)
        return EXIT_FAILED
    except SystemExit as done:
        code = done.code
        if code is None:
            return EXIT_OK
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
