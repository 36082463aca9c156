"""The local AWS: a moto server with atomic DynamoDB requests, moto's patches for long sessions,
and the tables and queues provisioned from template.yaml."""
