"""Plumbing shared by the controller process, its clients, the CLI and the broker agent."""
