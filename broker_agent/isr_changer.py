"""The production `IsrChanger`: AlterPartition to the active controller over the
agent's admin client, with the broker's current broker epoch; the changes the
replica manager gathered go in one request, answered per partition."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from broker_agent.partitions.api import IsrChangeRequest
from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.gen import admin_pb2 as api

log = logging.getLogger(__name__)


class AdminIsrChanger:
    def __init__(
        self,
        client: AdminClient,
        broker_epoch: Callable[[], int],
        deadline_s: Callable[[], float],
    ) -> None:
        self.client = client
        self.broker_epoch = broker_epoch
        self.deadline_s = deadline_s

    async def alter_partitions(
        self, broker_id: int, requests: Sequence[IsrChangeRequest]
    ) -> list[bool]:
        items = [
            api.AlterPartitionItem(
                topic_id=r.topic_id,
                partition=r.partition,
                leader_epoch=r.leader_epoch,
                new_isr=list(r.new_isr),
                partition_epoch=r.partition_epoch,
            )
            for r in requests
        ]
        try:
            reply = await self.client.admin(
                "AlterPartition",
                api.AlterPartitionRequest(
                    broker_id=broker_id, broker_epoch=self.broker_epoch(), partitions=items
                ),
                deadline_s=self.deadline_s(),
            )
        except (AdminError, NoControllerError) as err:
            log.info(
                "broker %d: AlterPartition of %d partitions failed: %s",
                broker_id, len(requests), err,
            )  # fmt: skip
            return [False] * len(requests)
        errors = {(r.topic_id, r.partition): r.error for r in reply.results}
        accepted = []
        for request in requests:
            error = errors.get((request.topic_id, request.partition))
            ok = error is not None and error.error_code == 0
            if not ok:
                log.info(
                    "broker %d: AlterPartition for %s-%d refused: %s",
                    broker_id, request.topic, request.partition, error or "no answer",
                )  # fmt: skip
            accepted.append(ok)
        return accepted
