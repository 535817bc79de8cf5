#!/usr/bin/env python3
"""Writes inferplane's Grafana dashboards (the JSON model, schemaVersion 39) beside this file
and into the Helm chart (charts/inferplane/dashboards/, which the chart's ConfigMap reads:
Helm reads no file outside the chart).

    python3 deploy/grafana/dashboards.py   # rewrites deploy/grafana/*.json and the chart's

The JSON files are checked in (Grafana, the Helm chart's ConfigMap and compose read them);
edit this script and rerun it rather than editing them by hand. Every query uses only series
listed in docs/metrics.md; integration/test_observability.py runs each one against a real
Prometheus scraping a real stack.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "..", "..", "charts", "inferplane", "dashboards")
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"


def r(expr):
    """`expr` with [$__rate_interval] for every [RI]."""
    return expr.replace("[RI]", "[%s]" % RI)


class Board:
    def __init__(self, uid, title, description, variables=()):
        self.uid, self.title, self.description = uid, title, description
        self.panels, self.x, self.y, self.row_h = [], 0, 0, 0
        self.variables = [{
            "name": "datasource", "label": "Prometheus", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "",
        }] + list(variables)

    def row(self, title):
        if self.x:
            self.x, self.y = 0, self.y + self.row_h
        self.panels.append({"id": len(self.panels) + 1, "type": "row", "title": title,
                            "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1
        self.row_h = 0

    def panel(self, title, targets, unit="short", kind="timeseries", w=12, h=8, desc=""):
        """targets: [(expr, legend)]"""
        if self.x + w > 24:
            self.x, self.y = 0, self.y + self.row_h
            self.row_h = 0
        p = {
            "id": len(self.panels) + 1, "type": kind, "title": title, "description": desc,
            "datasource": DS, "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                        "tooltip": {"mode": "multi"}} if kind == "timeseries" else
                       {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area"},
            "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": r(e),
                         "legendFormat": legend, "range": True}
                        for i, (e, legend) in enumerate(targets)],
        }
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)

    def json(self):
        return {
            "uid": self.uid, "title": self.title, "description": self.description,
            "tags": ["inferplane"], "editable": True, "schemaVersion": 39, "version": 1,
            "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "",
            "graphTooltip": 1, "fiscalYearStartMonth": 0, "liveNow": False,
            "annotations": {"list": []}, "links": [],
            "templating": {"list": self.variables}, "panels": self.panels,
        }


def query_var(name, label, query, multi=True):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": "%s-var" % name}, "definition": query,
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": multi,
            "allValue": ".*" if multi else None, "current": {}, "hide": 0, "regex": ""}


POOL = query_var("pool", "Pool", "label_values(inferplane_requests_total, pool)")
TENANT = query_var("tenant", "Tenant", "label_values(inferplane_requests_total, tenant)",
                   multi=False)
FAILED = 'outcome=~"rejected|rate_limited|queue_timeout|error"'
POLICY_INFO = ("inferplane_policy_info == 1 or inferplane_decider_policy_info == 1 or "
               "inferplane_gateway_policy_info == 1")


def q(quantile, family, by, sel):
    return ("histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[RI])))"
            % (quantile, ", ".join(by + ["le"]), family, sel))


def ratio(num, den, by="pool"):
    """sum by (by) of rate(num) over the same of rate(den); num and den are selectors."""
    return "sum by (%s) (rate(%s[RI])) / sum by (%s) (rate(%s[RI]))" % (by, num, by, den)


def cache_ratio(by, sel):
    b = "sum by (%s) " % by if by else "sum "
    return ("%s(rate(inferplane_prompt_tokens_cached_total{%s}[RI])) / (%s(rate("
            "inferplane_prompt_tokens_cached_total{%s}[RI])) + %s(rate("
            "inferplane_prompt_tokens_uncached_total{%s}[RI])))" % (b, sel, b, sel, b, sel))


def outcomes_panel(b, sel, desc=""):
    b.panel("Requests by outcome", [(
        "sum by (outcome) (rate(inferplane_request_outcomes_total{%s}[RI]))" % sel,
        "{{outcome}}")], "reqps", desc=desc)


def tokens_panel(b, sel, desc=""):
    b.panel("Tokens", [
        ("sum(rate(inferplane_prompt_tokens_cached_total{%s}[RI]))" % sel, "prompt, cached"),
        ("sum(rate(inferplane_prompt_tokens_uncached_total{%s}[RI]))" % sel, "prompt, uncached"),
        ("sum(rate(inferplane_completion_tokens_total{%s}[RI]))" % sel, "completion")],
        "short", desc=desc)


def cost_panel(b, sel, desc):
    b.panel("Provider cost", [(
        "sum by (backend) (rate(inferplane_provider_cost_usd_total{%s}[RI])) * 3600" % sel,
        "{{backend}}")], "currencyUSD", desc=desc)


def pool_gauge(name, sel, extra=""):
    """A decider's per-pool gauge, over decider replicas: each holds the whole state, so the
    max, never the sum (docs/metrics.md, "Summing over replicas")."""
    return "max by (pool%s) (%s{%s})" % (extra, name, sel)


def pools_row(b, s):
    b.row("Pools (deciders' view of the workers)")
    b.panel("Requests queued and running on the workers", [
        (pool_gauge("inferplane_decider_pool_requests_waiting", s), "{{pool}} waiting"),
        (pool_gauge("inferplane_decider_pool_requests_running", s), "{{pool}} running")],
        "short", desc="sums of the workers' vllm:num_requests_waiting and _running per pool")
    b.panel("KV-cache usage (mean of the pool's workers)", [
        (pool_gauge("inferplane_decider_pool_kv_cache_usage_ratio", s), "{{pool}}")],
        "percentunit")
    b.panel("Workers by KV state", [
        (pool_gauge("inferplane_decider_pool_workers_by_kv_state", s, ", kv_state"),
         "{{pool}} {{kv_state}}")], "short",
        desc="degraded: routed by load only; unknown: no load report yet")
    b.panel("Workers by health", [
        (pool_gauge("inferplane_decider_pool_workers_by_health", s, ", health"),
         "{{pool}} {{health}}")], "short")


def overview():
    b = Board("inferplane-overview", "inferplane / cluster overview",
              "Every request through every gateway: traffic, outcomes, latency, tokens, cost.",
              [POOL])
    s = 'pool=~"$pool"'
    b.row("Traffic")
    outcomes_panel(b, s, "ok, rejected, rate_limited, queue_timeout, failed_over, spilled, error")
    b.panel("Responses by HTTP status", [(
        "sum by (status_code) (rate(inferplane_requests_total{%s}[RI]))" % s, "{{status_code}}")],
        "reqps")
    b.panel("Failed share", [(
        "(sum(rate(inferplane_request_outcomes_total{%s,%s}[RI])) or vector(0)) / "
        "sum(rate(inferplane_request_outcomes_total{%s}[RI]))" % (s, FAILED, s), "failed")],
        "percentunit", kind="stat", w=6)
    b.panel("Prompt cache-hit ratio", [(cache_ratio("", s), "cached")], "percentunit",
            kind="stat", w=6)
    b.panel("Top tenants by requests", [(
        "topk(10, sum by (tenant) (rate(inferplane_requests_total{%s}[RI])))" % s, "{{tenant}}")],
        "reqps")
    b.row("Latency")
    b.panel("TTFT per pool", [(q(0.5, "inferplane_request_ttft_seconds", ["pool"], s),
                               "{{pool}} p50"),
                              (q(0.99, "inferplane_request_ttft_seconds", ["pool"], s),
                               "{{pool}} p99")], "s")
    b.panel("Inter-token latency per pool", [
        (q(0.5, "inferplane_request_itl_seconds", ["pool"], s), "{{pool}} p50"),
        (q(0.99, "inferplane_request_itl_seconds", ["pool"], s), "{{pool}} p99")], "s")
    b.panel("End-to-end latency per pool", [
        (q(0.5, "inferplane_request_e2e_seconds", ["pool"], s), "{{pool}} p50"),
        (q(0.99, "inferplane_request_e2e_seconds", ["pool"], s), "{{pool}} p99")], "s")
    b.panel("Queue wait per pool (requests that waited)", [
        (q(0.99, "inferplane_request_queue_wait_seconds", ["pool"], s), "{{pool}} p99")], "s")
    pools_row(b, s)
    b.row("Tokens and cost")
    tokens_panel(b, s, "tokens per second (usage)")
    cost_panel(b, s, "USD per hour, from the providers' cost hints")
    b.panel("GenAI token usage (OpenTelemetry)", [(
        "sum by (gen_ai_token_type) (rate(gen_ai_client_token_usage_sum[RI]))",
        "{{gen_ai_token_type}}")], "short")
    b.panel("GenAI time to first token p99 by model (OpenTelemetry)", [(
        "histogram_quantile(0.99, sum by (gen_ai_request_model, le) "
        "(rate(gen_ai_server_time_to_first_token_seconds_bucket[RI])))",
        "{{gen_ai_request_model}}")], "s")
    return b


def tenant():
    b = Board("inferplane-tenant", "inferplane / tenant",
              "One tenant ($tenant): its traffic, outcomes, latency, cache hits, limits, cost.",
              [TENANT])
    s = 'tenant=~"$tenant"'
    b.row("Traffic")
    outcomes_panel(b, s)
    b.panel("Refused and failed, by reason", [(
        "sum by (outcome, reason) (rate(inferplane_request_failures_total{%s}[RI]))" % s,
        "{{outcome}}: {{reason}}")], "reqps")
    b.panel("Rate-limited share", [(
        "(sum(rate(inferplane_request_outcomes_total{%s,outcome=\"rate_limited\"}[RI])) or "
        "vector(0)) / sum(rate(inferplane_request_outcomes_total{%s}[RI]))" % (s, s),
        "rate limited")],
        "percentunit", kind="stat", w=6)
    b.panel("Prompt cache-hit ratio", [(cache_ratio("", s), "cached")], "percentunit",
            kind="stat", w=6)
    b.panel("Requests by pool and model", [(
        "sum by (pool, model) (rate(inferplane_requests_total{%s}[RI]))" % s,
        "{{pool}} / {{model}}")], "reqps")
    b.row("Latency")
    b.panel("TTFT", [(q(x, "inferplane_request_ttft_seconds", ["pool"], s), "{{pool}} p%d" % p)
                     for x, p in ((0.5, 50), (0.9, 90), (0.99, 99))], "s")
    b.panel("Inter-token latency", [
        (q(0.99, "inferplane_request_itl_seconds", ["pool"], s), "{{pool}} p99")], "s")
    b.panel("End-to-end latency", [
        (q(0.99, "inferplane_request_e2e_seconds", ["pool"], s), "{{pool}} p99")], "s")
    b.panel("Queue wait", [
        (q(0.99, "inferplane_request_queue_wait_seconds", ["pool"], s), "{{pool}} p99")], "s")
    b.row("Tokens and cost")
    b.panel("Cache-hit ratio per pool", [(cache_ratio("pool", s), "{{pool}}")], "percentunit")
    tokens_panel(b, s, "tokens per second (usage)")
    cost_panel(b, s, "USD per hour, from the providers' cost hints")
    return b


def routing():
    b = Board("inferplane-routing", "inferplane / routing quality",
              "Is routing finding the cache, is the TTFT prediction right, where did requests go "
              "and why.", [POOL])
    s = 'pool=~"$pool"'
    b.row("Cache")
    b.panel("Prompt cache-hit ratio per pool", [(cache_ratio("pool", s), "{{pool}}")],
            "percentunit")
    b.panel("Cached and uncached prompt tokens per endpoint", [
        ("sum by (endpoint) (rate(inferplane_prompt_tokens_cached_total{%s}[RI]))" % s,
         "{{endpoint}} cached"),
        ("sum by (endpoint) (rate(inferplane_prompt_tokens_uncached_total{%s}[RI]))" % s,
         "{{endpoint}} uncached")], "short")
    b.row("TTFT prediction")
    b.panel("Predicted vs observed TTFT (mean)", [
        (ratio("inferplane_ttft_predicted_seconds_total{%s}" % s,
               "inferplane_ttft_prediction_error_seconds_count{%s}" % s), "{{pool}} predicted"),
        (ratio("inferplane_ttft_observed_seconds_total{%s}" % s,
               "inferplane_ttft_prediction_error_seconds_count{%s}" % s), "{{pool}} observed")],
        "s")
    b.panel("Prediction bias (predicted / observed)", [(
        ratio("inferplane_ttft_predicted_seconds_total{%s}" % s,
              "inferplane_ttft_observed_seconds_total{%s}" % s), "{{pool}}")],
        "percentunit", desc="100%: unbiased; above: the decider overestimates")
    b.panel("Absolute prediction error", [
        (q(0.5, "inferplane_ttft_prediction_error_seconds", ["pool"], s), "{{pool}} p50"),
        (q(0.9, "inferplane_ttft_prediction_error_seconds", ["pool"], s), "{{pool}} p90")], "s")
    b.row("Where requests went and why")
    b.panel("Decisions by reason", [(
        "sum by (reason) (rate(inferplane_request_decisions_total{%s}[RI]))" % s, "{{reason}}")],
        "reqps")
    b.panel("Decisions by target kind and strategy", [(
        "sum by (target_kind, strategy) (rate(inferplane_request_decisions_total{%s}[RI]))" % s,
        "{{target_kind}} ({{strategy}})")], "reqps")
    b.panel("Requests per endpoint", [(
        "sum by (pool, endpoint) (rate(inferplane_requests_total{%s}[RI]))" % s,
        "{{pool}} {{endpoint}}")], "reqps")
    b.panel("Spilled and failed over, share", [
        (ratio("inferplane_request_outcomes_total{%s,outcome=\"%s\"}" % (s, o),
               "inferplane_request_outcomes_total{%s}" % s), "{{pool}} %s" % o.replace("_", " "))
        for o in ("spilled", "failed_over")], "percentunit")
    b.panel("Policy rules that decided", [(
        "sum by (rule) (rate(inferplane_request_rules_total{%s}[RI]))" % s, "{{rule}}")], "reqps")
    b.panel("Requests by semantic label", [(
        "sum by (label) (rate(inferplane_request_labels_total[RI]))", "{{label}}")], "reqps")
    b.panel("Decider decisions by reason (every decision, retries included)", [(
        "sum by (reason) (rate(inferplane_decider_decisions_total[RI]))", "{{reason}}")],
        "reqps", w=24)
    return b


def control_plane():
    b = Board("inferplane-control-plane", "inferplane / control-plane health",
              "Deciders, aggregators, collectors, the policy service, gateways and exporters.")
    b.row("Decisions")
    b.panel("Decision latency (decider)", [
        ("histogram_quantile(0.5, sum by (le) (rate(inferplane_decider_decision_seconds_bucket"
         "[RI])))", "p50"),
        ("histogram_quantile(0.99, sum by (le) (rate(inferplane_decider_decision_seconds_bucket"
         "[RI])))", "p99")], "s")
    b.panel("Route round trip (gateway to decider)", [
        ("histogram_quantile(0.99, sum by (le) (rate(inferplane_gateway_route_seconds_bucket"
         "[RI])))", "p99"),
        ("sum(rate(inferplane_gateway_route_timeouts_total[RI]))", "timeouts/s")], "s")
    b.row("State")
    b.panel("State lag per decider", [(
        "max by (instance) (inferplane_decider_state_lag_seconds)", "{{instance}}")], "s")
    b.panel("Deciders synced", [(
        "min by (instance) (inferplane_decider_state_synced)", "{{instance}}")], "short",
        kind="stat", w=6)
    b.panel("Workers by KV state (aggregator)", [(
        "max by (kv_state) (inferplane_aggregator_workers_by_kv_state)", "{{kv_state}}")],
        "short", kind="stat", w=6, desc="max over aggregator replicas: each holds all the state")
    b.panel("State age per pool (oldest worker report in a decider)", [(
        "max by (pool) (inferplane_decider_pool_state_age_seconds)", "{{pool}}")], "s",
        desc="how old the newest report of the pool's least recently heard worker is")
    b.panel("KV state per worker (collector: 0 exact, 1 syncing, 2 degraded)", [(
        "max by (worker) (inferplane_collector_kv_state)", "{{worker}}")], "short")
    b.panel("KV-event sequence gaps and resyncs", [
        ("sum by (worker) (rate(inferplane_collector_sequence_gaps_total[RI]))", "gap {{worker}}"),
        ("sum by (reason) (rate(inferplane_decider_resyncs_total[RI]))", "resync {{reason}}")],
        "short")
    b.row("Policy")
    b.panel("Policy version per process", [
        ("max by (instance) (inferplane_policy_version)", "policy {{instance}}"),
        ("max by (instance) (inferplane_decider_policy_version)", "decider {{instance}}")],
        "short", desc="every decider should show the policy service's version")
    b.panel("Policies in use (distinct content hashes)", [
        ("count(count by (hash) (%s))" % POLICY_INFO, "policies"),
        ("count by (hash) (%s)" % POLICY_INFO, "{{hash}}")], "short",
        kind="stat", w=6, desc="1: the policy service, every decider and every gateway run the "
        "same policy; per hash, the processes that run it")
    b.panel("Policy errors and reloads", [
        ("max by (instance) (inferplane_policy_errors)", "errors {{instance}}"),
        ("sum(rate(inferplane_policy_reloads_total[RI]))", "reloads/s")], "short")
    b.row("Pipes")
    b.panel("Frames dropped by reason", [(
        "sum by (job, reason) (rate(inferplane_frames_dropped_total[RI]))",
        "{{job}} {{reason}}")], "short")
    b.panel("Records lost or overflowed", [
        ("sum(rate(inferplane_gateway_records_dropped_total[RI]))", "gateway records dropped"),
        ("sum by (dimension) (rate(inferplane_exporter_label_values_overflow_total[RI]))",
         "{{dimension}} overflow"),
        ("sum(rate(inferplane_exporter_label_overflow_total[RI]))", "label-set overflow")],
        "short")
    b.panel("Records applied per exporter", [(
        "sum by (instance) (rate(inferplane_exporter_records_total[RI]))", "{{instance}}")],
        "short", desc="the request records each exporter replica receives")
    b.panel("Gateway upstream transfers in flight", [(
        "sum(inferplane_gateway_inflight)", "in flight")], "short")
    b.panel("Processes up", [("sum by (job) (up)", "{{job}}")], "short")
    return b


BOARDS = {"inferplane-overview.json": overview, "inferplane-tenant.json": tenant,
          "inferplane-routing.json": routing, "inferplane-control-plane.json": control_plane}


def main():
    os.makedirs(CHART, exist_ok=True)
    for name, make in BOARDS.items():
        for folder in (HERE, CHART):
            with open(os.path.join(folder, name), "w") as f:
                json.dump(make().json(), f, indent=2, sort_keys=True)
                f.write("\n")


if __name__ == "__main__":
    main()
