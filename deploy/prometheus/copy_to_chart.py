#!/usr/bin/env python3
"""Copies inferplane-rules.yaml into the Helm chart (charts/inferplane/rules/), where the
chart's PrometheusRule template reads it: Helm reads no file outside the chart.

    python3 deploy/prometheus/copy_to_chart.py   # after editing inferplane-rules.yaml

The copy is checked in; integration/test_observability.py fails while it differs.
"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "inferplane-rules.yaml")
CHART = os.path.join(HERE, "..", "..", "charts", "inferplane", "rules", "inferplane-rules.yaml")


def main():
    os.makedirs(os.path.dirname(CHART), exist_ok=True)
    shutil.copyfile(RULES, CHART)


if __name__ == "__main__":
    main()
