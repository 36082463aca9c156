"""In-memory stand-ins with DynamoDB's, SQS's and telemetry's semantics, for tests and the
simulation. The same contract suites run against them and the real adapters (tests/contract)."""
