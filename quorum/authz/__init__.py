"""Authorization, one home for every process: Kafka's StandardAuthorizer
(`authorizer.py`, the decisions) and what each controller RPC needs
(`controller_actions.py`). Below the controller and the broker alike: it reads
ACLs through a callable and imports only the floor (`quorum.common`) and the
table of Kafka's error names."""
