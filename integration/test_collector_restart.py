"""A collector restart does not disable cache-aware routing (issue 20, defect 2): real sims with
a small replay buffer, aggregator, policy, decider and collector on loopback, the collector
killed with SIGKILL once the workers' buffers no longer start at batch 0.

- with --checkpoint-dir the new collector resumes from each worker's checkpoint (a replay from
  the saved batch proves it): exact at once, a probe routes to the worker holding its prefix;
- without one, the workers are RECOVERING (not DEGRADED): the index is rebuilt from what their
  buffers still hold and from new events, deciders use it (no decision is load_only), and a
  prompt served after the restart routes to its worker;
- with a checkpoint older than a worker's buffer, that worker's saved blocks become ghosts:
  not routed on, until a request extends their chain and shows them cached;
- a worker that never published is exact (empty) at once with a replay endpoint, and after a
  few silent seconds without one, instead of SYNCING forever;
- a corrupt checkpoint is ignored with a log line and counted, never a crash.
"""
import os
import time
import unittest

from lib.harness import Stack, wait_until, zmq_endpoint
from test_kv_recovery import (agg_worker, cand, chat, col_metric, col_worker, policy_yaml, route,
                              spec, start_aggregator, start_sim, text, wait_subscribed)

BUFFER = 24      # batches each sim keeps for replay (vLLM's buffer_steps; 10,000 by default)
BOUND_S = 10.0   # routing must be cache-aware again within this long after the restart


class Plane:
    """policy, an aggregator, a collector on a static worker list (restartable, with the same
    flags) and a decider whose routings are not assumed cached (--optimistic-ttl-ms 0), so that
    a cache hit says what the collector's index holds."""

    def __init__(self, st, sims, checkpoint_dir=None):
        self.st, self.sims = st, sims
        st.write("policy/sims.yaml", policy_yaml(sims))
        pol_pub, pol_rep = zmq_endpoint(), zmq_endpoint()
        st.start("policy", ["--dir", st.dir + "/policy", "--pub", pol_pub, "--rep", pol_rep,
                            "--republish-ms", "500"])
        self.agg = start_aggregator(st)
        self.args = ["--aggregator", self.agg.pull, "--workers", spec(sims),
                     "--scrape-interval-ms", "50"]
        if checkpoint_dir:
            self.args += ["--checkpoint-dir", checkpoint_dir, "--checkpoint-interval-ms", "100"]
        self.collector = st.start("collector", self.args)
        self.decider = st.start("decider", ["--listen", zmq_endpoint(),
                                            "--state-sub", self.agg.eps["pub"],
                                            "--state-snapshot", self.agg.eps["snap"],
                                            "--policy-sub", pol_pub, "--policy-req", pol_rep,
                                            "--optimistic-ttl-ms", "0"])

    def crash_and_restart_collector(self, while_down=None):
        """SIGKILL (no shutdown checkpoint), `while_down()`, then a new collector process."""
        self.collector.proc.kill()
        self.collector.proc.wait(5)
        if while_down:
            while_down()
        self.collector = self.st.start("collector", self.args)
        return self.collector


def churn(sims, batches, col=None, seed=100):
    """Distinct requests on every sim until each has published `batches` more batches: as the
    collector `col` counts them, or (no collector) one request per batch, as each request with
    a new prompt stores blocks in at least one batch."""
    def seen(s):
        return col_worker(col, s.worker_name)["last_seq"] or 0
    start = {s.worker_name: seen(s) for s in sims} if col else {}
    for k in range(400):
        if col and all(seen(s) >= start[s.worker_name] + batches for s in sims):
            return
        if not col and k == batches:
            return
        for s in sims:
            chat(s, text(seed + k, 60), max_tokens=40)
    raise AssertionError("the sims published fewer than %d batches" % batches)


def routes_by_cache(decider, prompt, owner):
    def ok():
        status, doc = route(decider, prompt + " probe")
        return status == 200 and doc["worker"] == owner and doc["reason"] == "cache_hit" and \
            cand(doc, owner)["cached_tokens"] >= 1000 and doc
    return ok


def checkpoint_current(col, names):
    def ok():
        for n in names:
            w = col_worker(col, n)
            if w["last_seq"] is None or w["checkpoint"]["saved_seq"] != w["last_seq"]:
                return False
        return True
    return ok


class TestCollectorRestart(unittest.TestCase):
    def setUp(self):
        self.st = Stack(self)
        self.w0 = start_sim(self.st, "w0", seed=1, buffer_steps=BUFFER)
        self.w1 = start_sim(self.st, "w1", seed=2, buffer_steps=BUFFER)
        self.p, self.q = text(31, 700), text(32, 700)

    def warm(self, plane):
        """P cached on w0, Q on w1, and more batches since than the buffers hold."""
        wait_subscribed(plane.collector, [plane.agg], ["w0", "w1"])
        chat(self.w0, self.p + " first")
        chat(self.w1, self.q + " first")
        churn([self.w0, self.w1], BUFFER + 4, col=plane.collector)
        for prompt, owner in ((self.p, "w0"), (self.q, "w1")):
            wait_until(routes_by_cache(plane.decider, prompt, owner), 15,
                       what="%s routed by its cache before the crash" % owner)

    def test_restart_resumes_from_checkpoint(self):
        ckdir = os.path.join(self.st.dir, "checkpoints")
        os.makedirs(ckdir)
        plane = Plane(self.st, [self.w0, self.w1], checkpoint_dir=ckdir)
        self.warm(plane)
        wait_until(checkpoint_current(plane.collector, ["w0", "w1"]), 10,
                   what="checkpoints of the last batches")
        t0 = time.monotonic()
        col = plane.crash_and_restart_collector()
        for name in ("w0", "w1"):
            cw = wait_until(lambda: col_worker(col, name)["kv_state"] == "exact" and
                            col_worker(col, name), BOUND_S, what=name + " exact again")
            self.assertIn(cw["checkpoint"]["resume"], ("proven", "continued"), cw)
            self.assertEqual(cw["kv_state_reason"], "checkpoint_resumed", cw)
            self.assertEqual(cw["degradations"], 0, cw)
        for prompt, owner in ((self.p, "w0"), (self.q, "w1")):
            wait_until(routes_by_cache(plane.decider, prompt, owner), BOUND_S,
                       what="%s routed by its cache after the restart" % owner)
        self.assertLess(time.monotonic() - t0, BOUND_S)
        self.assertEqual(agg_worker(plane.agg, "w0")["kv_state"], "exact")
        resumed = sum(col_metric(col, "inferplane_collector_checkpoint_resumes_total", result=r)
                      for r in ("proven", "continued"))
        self.assertEqual(resumed, 2)
        self.assertEqual(col_metric(col, "inferplane_collector_worker_state", worker="w0",
                                    state="exact"), 1)
        wait_until(lambda: col_metric(col, "inferplane_collector_checkpoint_writes_total",
                                      result="ok") > 0, 5, what="checkpoints written again")

    def test_restart_without_checkpoint_recovers(self):
        plane = Plane(self.st, [self.w0, self.w1])
        self.warm(plane)
        t0 = time.monotonic()
        col = plane.crash_and_restart_collector()
        for name in ("w0", "w1"):
            wait_until(lambda: not col_worker(col, name)["replaying"], BOUND_S,
                       what=name + "'s catch-up replay done")
        # a prompt served after the restart routes to the worker holding it...
        r = text(34, 700)
        chat(self.w1, r + " first")
        wait_until(routes_by_cache(plane.decider, r, "w1"), BOUND_S,
                   what="a new prompt routed by the cache of its worker")
        self.assertLess(time.monotonic() - t0, BOUND_S + 5)
        # ...and no decision falls back to load only: the rebuilt index is a subset, and used
        for prompt in (self.p, self.q, text(33, 400)):
            status, doc = route(plane.decider, prompt + " probe")
            self.assertEqual(status, 200, doc)
            self.assertNotEqual(doc["reason"], "load_only", doc)
            for c in doc["candidates"]:
                self.assertNotIn("degraded", c["note"], doc)
        for name in ("w0", "w1"):
            cw = col_worker(col, name)
            self.assertEqual(cw["kv_state"], "recovering", cw)
            self.assertEqual(cw["kv_state_reason"], "history_evicted", cw)
            self.assertEqual(cw["wire_kv_state"], "syncing", cw)
            self.assertIsNotNone(cw["recovering_since_seq"], cw)
            self.assertGreater(cw["mapped_blocks"], 0, cw)  # what the buffer still held
            self.assertIsNone(cw["retry_in_ms"], cw)  # batch 0 is gone for good: no retries
            self.assertEqual(agg_worker(plane.agg, name)["kv_state"], "syncing")
        self.assertEqual(col_metric(col, "inferplane_collector_worker_state", worker="w1",
                                    state="recovering"), 1)
        self.assertEqual(col_metric(col, "inferplane_collector_worker_state", worker="w1",
                                    state="degraded"), 0)
        self.assertGreater(col_metric(col, "inferplane_collector_worker_state_seconds",
                                      worker="w1"), 0)
        self.assertGreaterEqual(col_metric(col, "inferplane_collector_degraded_total",
                                           worker="w1"), 1)

    def test_stale_checkpoint_recovers_the_hot_prefix(self):
        ckdir = os.path.join(self.st.dir, "checkpoints")
        os.makedirs(ckdir)
        plane = Plane(self.st, [self.w0, self.w1], checkpoint_dir=ckdir)
        self.warm(plane)
        wait_until(checkpoint_current(plane.collector, ["w0", "w1"]), 10,
                   what="checkpoints of the last batches")
        # w0 goes on serving while the collector is down, past what its buffer holds
        col = plane.crash_and_restart_collector(while_down=lambda: churn([self.w0], BUFFER + 4,
                                                                         seed=500))

        cw = wait_until(lambda: col_worker(col, "w0")["kv_state"] == "recovering" and
                        not col_worker(col, "w0")["replaying"] and col_worker(col, "w0"),
                        BOUND_S, what="w0 recovering")
        self.assertEqual(cw["checkpoint"]["resume"], "evicted", cw)
        self.assertGreater(cw["ghost_blocks"], 0, cw)
        w1 = wait_until(lambda: col_worker(col, "w1")["kv_state"] == "exact" and
                        col_worker(col, "w1"), BOUND_S, what="w1 exact (its checkpoint holds)")
        self.assertIn(w1["checkpoint"]["resume"], ("proven", "continued"), w1)
        # P is known only as ghosts: not routed on
        status, doc = route(plane.decider, self.p + " probe")
        self.assertEqual(status, 200, doc)
        self.assertEqual(cand(doc, "w0")["cached_tokens"], 0, doc)
        # the next request that uses P shows its blocks cached: routed by cache again
        chat(self.w0, self.p + " second question")
        wait_until(routes_by_cache(plane.decider, self.p, "w0"), BOUND_S,
                   what="P routed to w0 by its cache again")
        self.assertGreater(col_worker(col, "w0")["recovered_blocks"], 20)
        self.assertGreater(col_metric(col, "inferplane_collector_recovered_blocks_total",
                                      worker="w0"), 20)
        self.assertEqual(col_metric(col, "inferplane_collector_checkpoint_resumes_total",
                                    result="evicted"), 1)
        self.assertTrue(routes_by_cache(plane.decider, self.q, "w1")())


class TestCollectorEdges(unittest.TestCase):
    def test_idle_workers_are_exact(self):
        st = Stack(self)
        idle = start_sim(st, "idle")                   # a replay endpoint that holds nothing
        quiet = start_sim(st, "quiet", replay=False)   # no replay endpoint at all
        agg = start_aggregator(st)
        col = st.start("collector", ["--aggregator", agg.pull, "--workers", spec([idle, quiet]),
                                     "--scrape-interval-ms", "50"])
        cw = wait_until(lambda: col_worker(col, "idle")["kv_state"] == "exact" and
                        col_worker(col, "idle"), 5, what="the idle worker exact")
        self.assertEqual(cw["kv_state_reason"], "nothing_published", cw)
        wait_until(lambda: (agg_worker(agg, "idle") or {}).get("kv_state") == "exact", 5,
                   what="the idle worker exact at the aggregator")
        cw = wait_until(lambda: col_worker(col, "quiet")["kv_state"] == "exact" and
                        col_worker(col, "quiet"), 10, what="the quiet worker exact")
        self.assertEqual(cw["kv_state_reason"], "no_batch_published", cw)
        # its first batch (0) continues that base
        time.sleep(0.3)
        chat(idle, text(1, 200))
        w = wait_until(lambda: (agg_worker(agg, "idle") or {}).get("blocks", 0) > 0 and
                       agg_worker(agg, "idle"), 5, what="the idle worker's first blocks")
        self.assertEqual(w["kv_state"], "exact")

    def test_corrupt_checkpoint_is_ignored(self):
        st = Stack(self)
        w0 = start_sim(st, "w0")
        ckdir = os.path.join(st.dir, "checkpoints")
        os.makedirs(ckdir)
        with open(os.path.join(ckdir, "w0.ckpt"), "wb") as f:
            f.write(b"IPLCKPT\n" + os.urandom(300))
        agg = start_aggregator(st)
        col = st.start("collector", ["--aggregator", agg.pull, "--workers", spec([w0]),
                                     "--scrape-interval-ms", "50", "--checkpoint-dir", ckdir,
                                     "--checkpoint-interval-ms", "100"])
        wait_until(lambda: col_worker(col, "w0")["kv_state"] == "exact", 5, what="w0 exact")
        self.assertEqual(col_metric(col, "inferplane_collector_checkpoint_resumes_total",
                                    result="corrupt"), 1)
        self.assertIn("checkpoint_ignored", col.log())
        time.sleep(0.3)
        chat(w0, text(2, 200))
        wait_until(lambda: col_worker(col, "w0")["checkpoint"]["saved_seq"] is not None, 5,
                   what="a valid checkpoint written over it")
        self.assertTrue(col.alive())


if __name__ == "__main__":
    unittest.main()
