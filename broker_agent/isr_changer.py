"""The production `IsrChanger`: AlterPartition to the active controller over the
agent's admin client, with the broker's current broker epoch; the changes the
replica manager gathered go in one request, answered per partition."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from broker_agent.partitions.api import REFUSED, IsrChangeRequest, IsrChangeResult
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
    ) -> list[IsrChangeResult]:
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
            return [REFUSED] * len(requests)
        answers = {(r.topic_id, r.partition): r for r in reply.results}
        results = []
        for request in requests:
            answer = answers.get((request.topic_id, request.partition))
            if answer is None or answer.error.error_code != 0:
                log.info(
                    "broker %d: AlterPartition for %s-%d refused: %s",
                    broker_id, request.topic, request.partition,
                    answer.error if answer is not None else "no answer",
                )  # fmt: skip
                results.append(REFUSED)
                continue
            results.append(IsrChangeResult(
                True, answer.leader_epoch, answer.partition_epoch, tuple(answer.isr)
            ))  # fmt: skip
        return results
