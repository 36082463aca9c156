"""jobsched: a serverless distributed job scheduler for AWS.

Layout (folders show the architecture):
- ``core/``      pure scheduling rules: schedules, job and run models, the transitions with their
                 named conditions, retry/misfire/overlap policies. No boto3, no environment, no wall clock.
- ``services/``  the use cases (trigger tick, worker, miss detector, registrar, operations) written
                 against the ports in ``ports.py``.
- ``adapters/``  the only place boto3 is used (DynamoDB, SQS), plus in-memory twins that pass the
                 same contract tests.
- ``runtime/``   wiring for Lambda: settings, telemetry (Powertools), system clock.
- ``cli/``       the ``jobsched`` command.
"""

__version__ = "0.1.0"
