"""The template's parameter Rules: the combinations CloudFormation must refuse before anything
changes, because a stack deployed with them would break (issue 27, item 8).

``python -m jobsched_tools.ops.rules`` rewrites the block between the two marker lines of
template.yaml from ``rules()``; ``--check`` only reports whether it is current (the template tests
run the same check, and evaluate the Rules in Python over parameter values: ``evaluate``).

Rules can use only a few intrinsic functions (Fn::And, Fn::Contains, Fn::EachMemberEquals,
Fn::EachMemberIn, Fn::Equals, Fn::Not, Fn::Or, Fn::RefAll, Fn::ValueOf, Fn::ValueOfAll and Ref:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-rules.html).
None compares numbers, so a numeric rule is written as a list of the values it refuses
(Fn::Not of Fn::Contains), per value of the other parameter, which must therefore come from a short
list (AllowedValues). Values are compared as written: "15.0" is not "15". Write whole numbers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from jobsched_tools.ops import blocks

BEGIN = "  # BEGIN generated rules: edit rules() in tools/jobsched_tools/ops/rules.py, then run"
BEGIN_2 = "  # `python -m jobsched_tools.ops.rules` (the template tests fail while they disagree)."
END = "  # END generated rules"

# The tick rates the template allows (TickRate's AllowedValues), in seconds.
TICK_RATES = {"rate(1 minute)": 60, "rate(2 minutes)": 120, "rate(5 minutes)": 300}
# The lookahead must cover the tick interval plus this: EventBridge's delivery of a tick and the
# tick's own claim time, so that an occurrence due just after the next tick is claimed by this one.
LOOKAHEAD_SLACK_S = 10
# HeartbeatSeconds' AllowedValues: a short list, so that "at most half the lease" can be a rule.
HEARTBEATS = (1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 300)
LEASE_MIN = 5  # LeaseSeconds' MinValue (SchedulerConfig.lease_seconds)


def min_lookahead(tick_seconds: int) -> int:
    return tick_seconds + LOOKAHEAD_SLACK_S


def _name(text: str) -> str:
    return "".join(ch for ch in text.title() if ch.isalnum())


def rules() -> dict[str, dict[str, Any]]:
    """The Rules section, as CloudFormation JSON."""
    out: dict[str, dict[str, Any]] = {}
    for rate, seconds in TICK_RATES.items():
        refused = [str(v) for v in range(1, min_lookahead(seconds))]
        out[f"LookaheadCoversTheTick{_name(rate)}"] = {
            "RuleCondition": {"Fn::Equals": [{"Ref": "TickRate"}, rate]},
            "Assertions": [
                {
                    "Assert": {"Fn::Not": [{"Fn::Contains": [refused, {"Ref": "LookaheadSeconds"}]}]},
                    "AssertDescription": f"With TickRate {rate}, LookaheadSeconds must be at least "
                    f"{min_lookahead(seconds)} (the tick interval plus {LOOKAHEAD_SLACK_S} s), or "
                    "occurrences due just after a tick start late.",
                }
            ],
        }
    for heartbeat in HEARTBEATS:
        refused = [str(v) for v in range(LEASE_MIN, 2 * heartbeat)]
        if not refused:
            continue
        out[f"HeartbeatWithinHalfTheLease{heartbeat}"] = {
            "RuleCondition": {"Fn::Equals": [{"Ref": "HeartbeatSeconds"}, str(heartbeat)]},
            "Assertions": [
                {
                    "Assert": {"Fn::Not": [{"Fn::Contains": [refused, {"Ref": "LeaseSeconds"}]}]},
                    "AssertDescription": f"With HeartbeatSeconds {heartbeat}, LeaseSeconds must be at "
                    f"least {2 * heartbeat}: the settings refuse a heartbeat above half the lease at "
                    "every cold start, which would roll the deployment back.",
                }
            ],
        }
    return out


def _flow(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def render() -> str:
    lines = [BEGIN, BEGIN_2, "Rules:"]
    for name, rule in rules().items():
        (condition_ref, value) = rule["RuleCondition"]["Fn::Equals"]
        (assertion,) = rule["Assertions"]
        refused, target = assertion["Assert"]["Fn::Not"][0]["Fn::Contains"]
        lines += [
            f"  {name}:",
            f'    RuleCondition: !Equals [!Ref {condition_ref["Ref"]}, "{value}"]',
            "    Assertions:",
            "      - Assert:",
            "          Fn::Not:",
            "            - Fn::Contains:",
            f"                - {_flow(refused)}",
            f"                - !Ref {target['Ref']}",
            f"        AssertDescription: {json.dumps(assertion['AssertDescription'])}",
        ]
    lines.append(END)
    return "\n".join(lines)


def current(text: str) -> str:
    """The generated block as it stands in ``text`` (the template)."""
    return blocks.current(text, BEGIN, END)


# --- evaluating Rules in Python ------------------------------------------------------------------


def _value(node: Any, parameters: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        ((function, args),) = node.items()
        if function == "Ref":
            return parameters[args]
        if function == "Fn::Equals":
            left, right = (_value(a, parameters) for a in args)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not _value(args[0], parameters)
        if function == "Fn::And":
            return all(_value(a, parameters) for a in args)
        if function == "Fn::Or":
            return any(_value(a, parameters) for a in args)
        if function == "Fn::Contains":
            values, needle = args
            return str(_value(needle, parameters)) in [str(_value(v, parameters)) for v in values]
        raise ValueError(f"not a rule function here: {function}")
    return node


def evaluate(template: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    """The AssertDescription of every assertion ``parameters`` fail (each parameter as written;
    missing ones take the template's Default), as CloudFormation evaluates the Rules."""
    values = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
    values.update({name: str(value) for name, value in parameters.items()})
    failed = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not _value(rule["RuleCondition"], values):
            continue
        failed += [a["AssertDescription"] for a in rule["Assertions"] if not _value(a["Assert"], values)]
    return failed


def parameter_refusals(template: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    """Why CloudFormation refuses ``parameters`` (each as written; missing ones take the default)
    before it makes or changes any resource: each parameter's own constraints (``AllowedValues``,
    ``AllowedPattern`` on the whole value of a String and on each item of a CommaDelimitedList,
    ``MinValue``/``MaxValue``), then the Rules (``evaluate``).
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/parameters-section-structure.html
    ("When applied to a parameter of type CommaDelimitedList, the pattern must match each value in
    the list"). Python's ``re`` stands in for CloudFormation's regular expressions: the patterns
    use only what both share (classes, groups, alternation, counts, one negative lookahead)."""
    import re

    refused = []
    for name, spec in template["Parameters"].items():
        value = str(parameters.get(name, spec.get("Default", "")))
        items = (
            [part.strip() for part in value.split(",")] if spec["Type"] == "CommaDelimitedList" else [value]
        )
        allowed = spec.get("AllowedValues")
        if allowed is not None and value not in [str(v) for v in allowed]:
            refused.append(f"{name}: {value!r} is not one of its AllowedValues")
        pattern = spec.get("AllowedPattern")
        for item in items if pattern else []:
            if re.fullmatch(pattern, item) is None:
                refused.append(f"{name}: {item!r} does not match its AllowedPattern")
        if spec["Type"] == "Number":
            try:
                number = float(value)
            except ValueError:
                refused.append(f"{name}: {value!r} is not a number")
                continue
            if number < spec.get("MinValue", float("-inf")) or number > spec.get("MaxValue", float("inf")):
                refused.append(f"{name}: {value} is outside its MinValue and MaxValue")
    return refused + evaluate(template, parameters)


def main(argv: list[str]) -> int:
    return blocks.rewrite(argv, BEGIN, END, render, "Rules", "jobsched_tools.ops.rules")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
