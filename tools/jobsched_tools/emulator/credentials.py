"""The dummy AWS credentials and region of every local AWS (moto in process, the local stack's moto
server): the one source for the tools, the scripts and the tests. The Makefile's exports repeat the
two values for the shell, which cannot import them."""

from __future__ import annotations

DUMMY_ACCESS_KEY_ID = "testing"
DUMMY_SECRET_ACCESS_KEY = "testing"
LOCAL_REGION = "us-east-1"

DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
    "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
    "AWS_DEFAULT_REGION": LOCAL_REGION,
}
