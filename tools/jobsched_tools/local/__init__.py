"""The local stack: moto, the real handlers in separate processes, the demo and fault sessions."""
