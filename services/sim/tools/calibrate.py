#!/usr/bin/env python3
"""Measures a running inferplane-sim the way a load generator would, to calibrate profiles.

    build/inferplane-sim --port 8000 --time-scale 10 --profile l40s-27b-fp8 &
    services/sim/tools/calibrate.py --url http://127.0.0.1:8000 --time-scale 10 \
        --prompt-words 600 --output-tokens 128 --concurrency 1,8,32

Each of C streams sends requests back to back (unique prompts, so nothing is cached, unless
--shared-prefix-words is set), streaming with ignore_eos; TTFT and inter-token latency are
measured on the client and multiplied by --time-scale, so they are in simulated seconds like
everything the simulator reports (client figures include the client's own latency, scaled
too; the server's means come from its /metrics histograms and are exact simulated time).
Prints one Markdown table row per concurrency.
Python 3 standard library only.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray").split()


def prompt(i, words, shared):
    body = " ".join(WORDS[(i * 7 + k * 13 + k // 5) % len(WORDS)] for k in range(words))
    return (shared + " " if shared else "") + "request %d: %s" % (i, body)


def one(url, text, out_tokens, scale):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"prompt": text, "max_tokens": out_tokens, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = last = None
    usage = None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices"):
            now = time.monotonic()
            first = first or now
            last = now
        if chunk.get("usage"):
            usage = chunk["usage"]
    conn.close()
    n = usage["completion_tokens"] if usage else 0
    ttft = (first - t0) * scale
    itl = (last - first) * scale / (n - 1) if n > 1 else None
    return ttft, itl, n, (time.monotonic() - t0) * scale, usage


def server_sums(url):
    """(sum, count) of the simulator's own TTFT and ITL histograms (simulated seconds)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"):
            for suffix in ("_sum", "_count"):
                if line.startswith(name + suffix + "{"):
                    out[name + suffix] = float(line.rsplit(" ", 1)[1])
    return out


def run(args, conc):
    results, lock = [], threading.Lock()
    counter = iter(range(10 ** 9))
    shared = prompt(-1, args.shared_prefix_words, "") if args.shared_prefix_words else ""

    def stream():
        for _ in range(args.requests_per_stream):
            with lock:
                i = next(counter) + conc * 100000
            r = one(args.url, prompt(i, args.prompt_words, shared), args.output_tokens,
                    args.time_scale)
            with lock:
                results.append(r)

    before = server_sums(args.url)
    t0 = time.monotonic()
    threads = [threading.Thread(target=stream) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = (time.monotonic() - t0) * args.time_scale
    after = server_sums(args.url)

    def mean(name):
        n = after[name + "_count"] - before.get(name + "_count", 0)
        return (after[name + "_sum"] - before.get(name + "_sum", 0)) / n if n else float("nan")

    ttfts = [r[0] for r in results]
    itls = [r[1] for r in results if r[1] is not None]
    toks = sum(r[2] for r in results)
    ptoks = statistics.mean(r[4]["prompt_tokens"] for r in results)
    return ("| %d | %.0f | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f |" % (
        conc, ptoks, statistics.median(ttfts), mean("vllm:time_to_first_token_seconds"),
        statistics.median(itls) * 1000, mean("vllm:inter_token_latency_seconds") * 1000,
        toks / wall, 1.0 / statistics.median(itls)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--prompt-words", type=int, default=600)
    ap.add_argument("--shared-prefix-words", type=int, default=0)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--requests-per-stream", type=int, default=3)
    ap.add_argument("--concurrency", default="1,8,32")
    args = ap.parse_args()
    print("| concurrency | prompt tokens | TTFT p50 client (s) | TTFT mean server (s) "
          "| ITL p50 client (ms) | ITL mean server (ms) | output tok/s (all) "
          "| tok/s per stream |")
    print("|---|---|---|---|---|---|---|---|")
    for c in (int(x) for x in args.concurrency.split(",")):
        print(run(args, c), flush=True)


if __name__ == "__main__":
    main()
