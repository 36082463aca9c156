"""The template's auto scaling of provisioned capacity (``CapacityMode: PROVISIONED``, issue 37).

Every table and every global secondary index gets two scalable targets (read and write capacity)
with a target-tracking policy each, under the ``ProvisionedCapacity`` condition. A GSI has its own
provisioned throughput and throttles its table's writes when it runs short, so leaving one out
would cap the table at the index's minimum. A claim index exists only under some values of
``ClaimShape`` (ports.DEPLOYED_INDEXES): its targets carry ``ProvisionedCapacity`` and its
presence (``HasDueIndex``, ...) combined with ``Fn::And`` in a named condition, since a scalable
target naming a missing index would fail the deploy. ``python -m jobsched_tools.ops.capacity``
rewrites the two blocks between the marker lines of template.yaml from ``SCALED`` (the combined
conditions, and the targets with their policies); ``--check`` only reports whether they are
current (the template tests run it). Generated for the reason alarms.py gives: SAM CLI rejects
``Fn::ForEach``.

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
from dataclasses import dataclass

from jobsched.ports import DUE_INDEX

from jobsched_tools.ops import blocks

BEGIN = "  # BEGIN generated capacity: edit SCALED in tools/jobsched_tools/ops/capacity.py, then run"
BEGIN_2 = "  # `python -m jobsched_tools.ops.capacity` (the template tests fail while they disagree)."
END = "  # END generated capacity"
# The conditions block, in the template's Conditions section.
CONDITIONS_BEGIN = (
    "  # BEGIN generated capacity conditions: edit SCALED in tools/jobsched_tools/ops/capacity.py, then run"
)
CONDITIONS_END = "  # END generated capacity conditions"
CONDITION = "ProvisionedCapacity"


@dataclass(frozen=True)
class Scaled:
    """One table, or one index of a table, whose read and write capacity auto scaling tracks."""

    table: str  # the table's logical id
    index: str | None = None  # a global secondary index's name
    presence: str | None = None  # the template condition the index exists under (None: always)

    @property
    def index_part(self) -> str:
        return "".join(word.capitalize() for word in self.index.split("-")) + "Index" if self.index else ""

    @property
    def stem(self) -> str:
        return f"{self.table}{self.index_part}"

    @property
    def condition(self) -> str:
        """The condition its targets and policies exist under: provisioned capacity, and the
        index's presence if it has one (a named condition: a resource's Condition takes a name)."""
        return f"Provisioned{self.stem}" if self.presence else CONDITION

    def condition_yaml(self) -> str | None:
        if not self.presence:
            return None
        return f"  {self.condition}: !And [!Condition {CONDITION}, !Condition {self.presence}]"

    def yaml(self, kind: str) -> str:
        """The scalable target and its policy for ``kind`` (``Read`` or ``Write``)."""
        level = "index" if self.index else "table"
        resource = f"table/${{{self.table}}}" + (f"/index/{self.index}" if self.index else "")
        target = f"{self.stem}{kind}Capacity"
        return "\n".join(
            [
                f"  {target}:",
                "    Type: AWS::ApplicationAutoScaling::ScalableTarget",
                f"    Condition: {self.condition}",
                "    Properties:",
                "      ServiceNamespace: dynamodb",
                f"      ResourceId: !Sub {resource}",
                f"      ScalableDimension: dynamodb:{level}:{kind}CapacityUnits",
                f"      MinCapacity: !Ref {kind}CapacityMin",
                f"      MaxCapacity: !Ref {kind}CapacityMax",
                "",
                f"  {target}Tracking:",
                "    Type: AWS::ApplicationAutoScaling::ScalingPolicy",
                f"    Condition: {self.condition}",
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


# The claim indexes follow ClaimShape (template.yaml's HasNextRunIndex, HasLeaseIndex,
# HasDueIndex; ports.DEPLOYED_INDEXES): a stack moving to the successor claim scales `due` from
# its migrating deploy, and stops scaling next-run and lease with the successor deploy
# (docs/proposals/successor-claim-build.md §5, "Capacity"). tests/template/test_capacity_mode.py
# holds SCALED to the template's indexes under each ClaimShape, both ways.
SCALED = (
    Scaled("JobsTable"),
    Scaled("StateTable"),
    Scaled("StateTable", "next-run", "HasNextRunIndex"),
    Scaled("RunsTable"),
    Scaled("RunsTable", "lease", "HasLeaseIndex"),
    Scaled("RunsTable", DUE_INDEX, "HasDueIndex"),
)


def render() -> str:
    """The generated block of scalable targets and policies for SCALED."""
    blocks = [scaled.yaml(kind) for scaled in SCALED for kind in ("Write", "Read")]
    return "\n".join([BEGIN, BEGIN_2, "", "\n\n".join(blocks), END])


def render_conditions() -> str:
    """The generated conditions: each index's provisioned capacity and presence, combined."""
    lines = [line for line in (scaled.condition_yaml() for scaled in SCALED) if line]
    return "\n".join([CONDITIONS_BEGIN, BEGIN_2, *lines, CONDITIONS_END])


def current(text: str) -> str:
    """The generated block as it stands in ``text`` (the template)."""
    return blocks.current(text, BEGIN, END)


def current_conditions(text: str) -> str:
    """The generated conditions block as it stands in ``text``."""
    return blocks.current(text, CONDITIONS_BEGIN, CONDITIONS_END)


def main(argv: list[str]) -> int:
    module = "jobsched_tools.ops.capacity"
    conditions = blocks.rewrite(
        argv, CONDITIONS_BEGIN, CONDITIONS_END, render_conditions, "capacity conditions", module
    )
    return max(conditions, blocks.rewrite(argv, BEGIN, END, render, "capacity", module))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
