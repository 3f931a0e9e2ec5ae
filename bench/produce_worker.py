"""One producer of `bench/produce.py`, in a process of its own.

A worker connects, prints `ready`, waits for a line on stdin holding the start
time (wall clock, the same for every worker), produces 1 KiB records for the
given seconds (or until it has sent `records`, when given) keeping at
most `window` unacknowledged (keyed `key-<n mod keys>` when `keys` is given: a
compacted topic refuses records without a key), waits for the last
answers, and prints one JSON line: records delivered and failed, the time of
the last delivery, and a sample of delivery latencies (produce call to
acknowledgement, in ms).

    python bench/produce_worker.py kafka '{"bootstrap": ..., "topic": ..., "acks": "all", ...}'
    python bench/produce_worker.py nats '{"servers": [...], "subject": ..., ...}'

Processes rather than threads: each producer gets its own interpreter, so the
Python side of one client never waits for another's GIL.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

SAMPLE = 20_000  # latencies kept per worker (a uniform sample past that)


class Tally:
    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.last = 0.0
        self.latencies_ms: list[float] = []
        self.first_error = ""

    def ok(self, sent: float) -> None:
        now = time.time()
        self.last = now
        self.delivered += 1
        latency = (now - sent) * 1000
        if len(self.latencies_ms) < SAMPLE:
            self.latencies_ms.append(latency)
        else:
            slot = random.randrange(self.delivered)
            if slot < SAMPLE:
                self.latencies_ms[slot] = latency

    def fail(self, error: object) -> None:
        self.failed += 1
        self.first_error = self.first_error or str(error)

    def report(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "failed": self.failed,
            "last": self.last,
            "first_error": self.first_error,
            "latencies_ms": [round(v, 3) for v in self.latencies_ms],
        }


def wait_for_start() -> float:
    print("ready", flush=True)
    line = sys.stdin.readline()
    start = float(line)
    time.sleep(max(0.0, start - time.time()))
    return start


def kafka(params: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": params["bootstrap"],
            "acks": params["acks"],
            "linger.ms": params["linger_ms"],
            "enable.idempotence": False,
            "queue.buffering.max.messages": max(100_000, params["window"]),
        }
    )
    tally = Tally()
    topic = params["topic"]
    payload = os.urandom(params["record_bytes"])
    producer.list_topics(topic, timeout=30)  # connected before the clock starts

    def delivered(sent: float) -> Any:
        return lambda err, _msg: tally.fail(err) if err is not None else tally.ok(sent)

    end = wait_for_start() + params["seconds"]
    produced = 0
    window, limit = params["window"], params.get("records") or float("inf")
    keys = params.get("keys") or 0
    while time.time() < end and produced < limit:
        if produced - tally.delivered - tally.failed >= window:
            producer.poll(0.001)
            continue
        key = b"key-%d" % (produced % keys) if keys else None
        try:
            producer.produce(topic, payload, key, on_delivery=delivered(time.time()))
            produced += 1
        except (BufferError, KafkaException) as err:
            tally.fail(err)
        producer.poll(0)
    left = producer.flush(60)
    for _ in range(left):
        tally.fail("not delivered within 60 s of the end")
    return tally.report()


async def nats(params: dict[str, Any]) -> dict[str, Any]:
    import nats as nats_client

    nc = await nats_client.connect(servers=params["servers"], max_reconnect_attempts=0)
    window = params["window"]
    js = nc.jetstream(timeout=30, publish_async_max_pending=window + 1)
    tally = Tally()
    subject = params["subject"]
    payload = os.urandom(params["record_bytes"])
    await js.publish(subject, payload)  # warm: the stream found, the reply inbox set up
    end = await asyncio.to_thread(wait_for_start) + params["seconds"]
    limit = params.get("records") or float("inf")
    if window <= 1:  # one publish in flight: each waits for its acknowledgement
        while time.time() < end and tally.delivered + tally.failed < limit:
            sent = time.time()
            try:
                await js.publish(subject, payload)
                tally.ok(sent)
            except Exception as err:
                tally.fail(err)
    else:  # pipelined: up to `window` publishes in flight, acknowledged as they come
        # The window is counted here, as the Kafka worker counts it, so the clock of
        # a publish starts when it is sent, not while it waits for room.
        room = asyncio.Semaphore(window)

        def done(sent: float) -> Any:
            def on_done(future: asyncio.Future[Any]) -> None:
                room.release()
                error = None if future.cancelled() else future.exception()
                tally.fail(error or "cancelled") if future.cancelled() or error else tally.ok(sent)

            return on_done

        sent_count = 0
        while time.time() < end and sent_count < limit:
            sent_count += 1
            await room.acquire()
            sent = time.time()
            future = await js.publish_async(subject, payload)
            future.add_done_callback(done(sent))
        try:
            await asyncio.wait_for(js.publish_async_completed(), 60)
        except TimeoutError:
            for _ in range(js.publish_async_pending()):
                tally.fail("not acknowledged within 60 s of the end")
    await nc.close()
    return tally.report()


def main() -> None:
    system, params = sys.argv[1], json.loads(sys.argv[2])
    result = kafka(params) if system == "kafka" else asyncio.run(nats(params))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
