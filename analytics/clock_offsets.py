"""Each broker's clock offset from its MetadataFetch exchanges, the way NTP does it.

One exchange gives four times: the broker sends (t1, broker clock), the
controller receives (t2) and answers (t3, controller clock), the broker
receives (t4). With the true offset `theta` (controller minus broker clock),
causality says t2 >= t1 + theta and t4 + theta >= t3, so

    t3 - t4 <= theta <= t2 - t1

an interval centred on NTP's estimate ((t2 - t1) + (t3 - t4)) / 2 whose width
is the round-trip delay (t4 - t1) - (t3 - t2); the time the controller held a
long poll cancels out. Every honest exchange's interval contains theta, so
within a time window (where drift is negligible) the estimate is the middle of
their intersection and its half-width is the uncertainty. Slow exchanges give
wide intervals and simply do not narrow it: outliers cost nothing.

Only if the intersection is empty (a clock stepped inside the window, or a
timestamp is wrong) does it fall back to NTP's clock filter: the median
estimate of the quarter of exchanges with the smallest delay, with half their
median delay as the uncertainty.

Timestamps are whole milliseconds, so each bound is widened by 1 ms.
Estimates are kept per broker and per answering controller (each controller
has its own clock) and per window of the controller's clock.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

QUANTUM_MS = 1.0


def samples(exchange: DataFrame, window_ms: int) -> DataFrame:
    """One row per exchange: its window, NTP estimate, delay and interval."""
    t1, t2 = F.col("fetch_send_time_ms"), F.col("controller_receive_time_ms")
    t3, t4 = F.col("controller_send_time_ms"), F.col("receive_time_ms")
    return exchange.select(
        "broker_id",
        F.coalesce("controller_id", F.lit(-1)).alias("controller_id"),
        window_start(t2, window_ms).alias("window_start_ms"),
        (((t2 - t1) + (t3 - t4)) / 2).alias("theta"),
        ((t4 - t1) - (t3 - t2)).cast("double").alias("delay"),
        (t3 - t4 - QUANTUM_MS).alias("low"),
        (t2 - t1 + QUANTUM_MS).alias("high"),
    )


def window_start(t: Column, window_ms: int) -> Column:
    return (F.floor(t / window_ms) * window_ms).cast("long")


def estimate(sample: DataFrame, keys: list[str]) -> DataFrame:
    """offset_ms and uncertainty_ms per group of `keys` (see the module docstring).

    One pass: the group's delay quartile comes from a window over the group,
    and the clock filter's medians are taken over the rows under it."""
    group = Window.partitionBy(*keys)
    fast = F.col("delay") <= F.col("delay_q1")
    bounds = (
        sample.withColumn("delay_q1", F.expr("percentile(delay, 0.25)").over(group))
        .groupBy(*keys)
        .agg(
            F.max("low").alias("low"),
            F.min("high").alias("high"),
            F.count("*").alias("samples"),
            F.min("delay").alias("min_delay_ms"),
            F.percentile(F.when(fast, F.col("theta")), 0.5).alias("filter_offset"),
            F.percentile(F.when(fast, F.col("delay")), 0.5).alias("filter_delay"),
        )
    )
    consistent = F.col("low") <= F.col("high")
    return bounds.select(
        *keys,
        F.when(consistent, (F.col("low") + F.col("high")) / 2)
        .otherwise(F.col("filter_offset"))
        .alias("offset_ms"),
        F.when(consistent, (F.col("high") - F.col("low")) / 2)
        .otherwise(F.col("filter_delay") / 2 + QUANTUM_MS)
        .alias("uncertainty_ms"),
        F.when(consistent, F.lit("intersection")).otherwise(F.lit("clock_filter")).alias("method"),
        "samples",
        "min_delay_ms",
    )
