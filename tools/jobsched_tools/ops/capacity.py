"""The template's auto scaling of provisioned capacity (``CapacityMode: PROVISIONED``, issue 37).

Every table and every global secondary index gets two scalable targets (read and write capacity)
with a target-tracking policy each, under the ``ProvisionedCapacity`` condition. A GSI has its own
provisioned throughput and throttles its table's writes when it runs short, so leaving one out
would cap the table at the index's minimum. ``python -m jobsched_tools.ops.capacity`` rewrites the
block between the marker lines of template.yaml from ``SCALED``; ``--check`` only reports whether
it is current (the template tests run it). Generated for the reason alarms.py gives: SAM CLI
rejects ``Fn::ForEach``.

Sources:
- AWS::ApplicationAutoScaling::ScalableTarget, ``RoleARN``: omitted, Application Auto Scaling uses
  its service-linked role for DynamoDB (AWSServiceRoleForApplicationAutoScaling_DynamoDBTable),
  created on first use: https://docs.aws.amazon.com/autoscaling/application/userguide/application-auto-scaling-service-linked-roles.html
- The resource ids and dimensions (``table/NAME``, ``table/NAME/index/INDEX``;
  ``dynamodb:table:WriteCapacityUnits``, ``dynamodb:index:ReadCapacityUnits``, ...) and the
  predefined metrics ``DynamoDBWriteCapacityUtilization``/``DynamoDBReadCapacityUtilization``:
  https://docs.aws.amazon.com/autoscaling/application/APIReference/API_RegisterScalableTarget.html
  and https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/AutoScaling.html
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from jobsched.ports import DUE_INDEX

from jobsched_tools.ops import blocks

BEGIN = "  # BEGIN generated capacity: edit SCALED in tools/jobsched_tools/ops/capacity.py, then run"
BEGIN_2 = "  # `python -m jobsched_tools.ops.capacity` (the template tests fail while they disagree)."
END = "  # END generated capacity"
CONDITION = "ProvisionedCapacity"


@dataclass(frozen=True)
class Scaled:
    """One table, or one index of a table, whose read and write capacity auto scaling tracks."""

    table: str  # the table's logical id
    index: str | None = None  # a global secondary index's name

    @property
    def stem(self) -> str:
        part = "".join(word.capitalize() for word in self.index.split("-")) + "Index" if self.index else ""
        return f"{self.table}{part}"

    def yaml(self, kind: str) -> str:
        """The scalable target and its policy for ``kind`` (``Read`` or ``Write``)."""
        level = "index" if self.index else "table"
        resource = f"table/${{{self.table}}}" + (f"/index/{self.index}" if self.index else "")
        target = f"{self.stem}{kind}Capacity"
        return "\n".join(
            [
                f"  {target}:",
                "    Type: AWS::ApplicationAutoScaling::ScalableTarget",
                f"    Condition: {CONDITION}",
                "    Properties:",
                "      ServiceNamespace: dynamodb",
                f"      ResourceId: !Sub {resource}",
                f"      ScalableDimension: dynamodb:{level}:{kind}CapacityUnits",
                f"      MinCapacity: !Ref {kind}CapacityMin",
                f"      MaxCapacity: !Ref {kind}CapacityMax",
                "",
                f"  {target}Tracking:",
                "    Type: AWS::ApplicationAutoScaling::ScalingPolicy",
                f"    Condition: {CONDITION}",
                "    Properties:",
                f"      PolicyName: jobsched-{kind.lower()}-utilization",
                "      PolicyType: TargetTrackingScaling",
                f"      ScalingTargetId: !Ref {target}",
                "      TargetTrackingScalingPolicyConfiguration:",
                "        TargetValue: !Ref CapacityTargetUtilization",
                "        PredefinedMetricSpecification:",
                f"          PredefinedMetricType: DynamoDB{kind}CapacityUtilization",
            ]
        )


SCALED = (
    Scaled("JobsTable"),
    Scaled("StateTable"),
    Scaled("StateTable", "next-run"),
    Scaled("RunsTable"),
    Scaled("RunsTable", "lease"),
)
# The successor claim's index (jobsched.ports.DUE_INDEX), scaled only where it exists: template.yaml
# does not create it yet (ports.UNDEPLOYED_INDEXES), and a scalable target naming a missing index
# would fail the deploy. The plan's deploy 1 adds the index and this to SCALED together; deploy 2
# removes next-run and lease (docs/proposals/successor-claim-build.md §5, "Capacity").
# tests/template/test_capacity_mode.py holds SCALED to the template's indexes, both ways.
DUE_SCALED = Scaled("RunsTable", DUE_INDEX)


def render(extra: Sequence[Scaled] = ()) -> str:
    """The generated block for SCALED, and ``extra`` after it (``(DUE_SCALED,)``: the block as
    deploy 1 will have it)."""
    blocks = [scaled.yaml(kind) for scaled in (*SCALED, *extra) for kind in ("Write", "Read")]
    return "\n".join([BEGIN, BEGIN_2, "", "\n\n".join(blocks), END])


def current(text: str) -> str:
    """The generated block as it stands in ``text`` (the template)."""
    return blocks.current(text, BEGIN, END)


def main(argv: list[str]) -> int:
    return blocks.rewrite(argv, BEGIN, END, render, "capacity", "jobsched_tools.ops.capacity")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
