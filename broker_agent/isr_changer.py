"""The production `IsrChanger`: AlterPartition to the active controller over the
agent's admin client, with the broker's current broker epoch."""

from __future__ import annotations

import logging
from collections.abc import Callable

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

    async def alter_partition(self, broker_id: int, request: IsrChangeRequest) -> bool:
        item = api.AlterPartitionItem(
            topic_id=request.topic_id,
            partition=request.partition,
            leader_epoch=request.leader_epoch,
            new_isr=list(request.new_isr),
            partition_epoch=request.partition_epoch,
        )
        try:
            reply = await self.client.admin(
                "AlterPartition",
                api.AlterPartitionRequest(
                    broker_id=broker_id, broker_epoch=self.broker_epoch(), partitions=[item]
                ),
                deadline_s=self.deadline_s(),
            )
        except (AdminError, NoControllerError) as err:
            log.info("broker %d: AlterPartition failed: %s", broker_id, err)
            return False
        refused = [r for r in reply.results if r.error.error_code != 0]
        for r in refused:
            log.info(
                "broker %d: AlterPartition for %s-%d refused: %s",
                broker_id, request.topic, request.partition, r.error,
            )  # fmt: skip
        return not refused
