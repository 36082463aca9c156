"""jobsched's tools: what people and tests run, never shipped to Lambda.

The ``jobsched`` command (``cli/``), the Python API (``api.py``), the local stack and the demo
(``local/``), the chaos simulation (``sim/``), the benchmark (``bench/``), the in-memory stand-ins
for DynamoDB, SQS and telemetry (``fakes/``) and the local AWS emulator on moto (``emulator/``).
The Lambda functions import only the ``jobsched`` package (layers/jobsched), which never imports
this one.
"""
