"""The controller process: gRPC transport, driver, config and metrics."""
