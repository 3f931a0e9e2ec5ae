"""Which certificate may speak for which voter.

A Raft request names its sender (`candidate_id`, `leader_id`, a voter's
`replica_id`), and the core believes it: a process that could claim to be a voter
could start elections, announce itself leader or end an epoch. Under mTLS the
peer's certificate says who it is, so a claim is checked against it: voter N must
present the principal bound to N, by default ``User:CN=controller-N`` (what
`make run TLS=1` issues), or the one `controller.quorum.voter.principals` names
(``1@User:CN=a;2@User:CN=b``: semicolons, since a subject holds commas). A
mismatch is CLUSTER_AUTHORIZATION_FAILED, counted and logged as an `identity`
refusal (`quorum.server.refusals`), and changes nothing.

Without client certificates (plaintext, or TLS without `ssl.client.auth`) there
is nothing to check the claim against; the core's leader stickiness and epoch
bound are then what stands between a forger and the quorum (README, "Security").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from quorum.common.tls import ClientAuth, TlsSettings


def default_voter_principal(node_id: int) -> str:
    return f"User:CN=controller-{node_id}"


@dataclass(frozen=True)
class VoterIdentity:
    """The principal bound to each voter; `enforced` only under client certificates."""

    principals: Mapping[int, str] = field(default_factory=dict)
    enforced: bool = False

    def problem(self, claimed: int, principal: str) -> str | None:
        """Why `principal` may not send a request as voter `claimed`, or None.

        A voter added at runtime (KIP-853) is in no configured list: it must
        present its default principal, or one the configured voters hold (the
        chart gives every controller one certificate), never any other, such as a
        broker's."""
        if not self.enforced:
            return None
        expected = self.principals.get(claimed)
        if expected is None:
            allowed = {default_voter_principal(claimed), *self.principals.values()}
            if principal in allowed:
                return None
            return (
                f"{principal} may not speak for voter {claimed} (added at runtime: "
                f"{' or '.join(sorted(allowed))})"
            )
        if principal == expected:
            return None
        return f"{principal} may not speak for voter {claimed} (bound to {expected})"


def voter_identity(
    voters: Iterable[int], configured: Mapping[int, str], tls: TlsSettings | None
) -> VoterIdentity:
    principals = {v: configured.get(v, default_voter_principal(v)) for v in voters}
    enforced = tls is not None and tls.client_auth is not ClientAuth.NONE
    return VoterIdentity(principals, enforced)
