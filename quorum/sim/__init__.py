"""A deterministic, seeded simulator for the Raft core (Kafka's RaftEventSimulationTest idea).

One seed fixes every delay, drop, crash and timeout, so a failure replays exactly.
"""
