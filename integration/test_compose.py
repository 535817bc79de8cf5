"""Docker: the images build from the repository, `docker-compose up` serves the stack of
`make run`, `--scale decider=3 --scale gateway=2` works, `docker-compose down` leaves nothing.

Everything is set up by the project's own scripts, as on a clean machine (CI):
tools/deps-docker.sh installs Debian's docker.io, docker-compose and mmdebstrap, starts a private
dockerd in a folder of this test's own (unless a Docker engine already answers at $DOCKER_HOST
or /var/run/docker.sock) and makes the base images debian:bookworm{,-slim} from this machine's
apt sources; `make image` compiles the programs from source inside compose/Dockerfile. The
stack runs as a compose project of its own, every host port a free one on 127.0.0.1
(INFERPLANE_PORT_*=""), so it never meets another test or a `make run`.

  1. the image: every program, a non-root user, only runtime libraries, a HEALTHCHECK;
  2. `docker-compose up`: every service ready, a streamed chat through the front (127.0.0.1's
     :8080 of `make run`), the second identical prompt routed to the worker that cached it
     (x-inferplane-worker / -reason / -cached-tokens headers);
  3. `compose/stack up decider=3 gateway=2` (docker-compose up -d --scale ... on the running
     stack): requests through each gateway replica and the front; the three deciders have each
     applied every routing any of them made and agree on every worker's in-flight count; the
     gateways share their limits (each counts 2 replicas); Prometheus finds every replica;
  4. `compose/stack down`: no container, network or volume of the project is left.

Skips, naming the reason, only where no Docker engine can start (deps-docker.sh exits 3).
Takes 2-4 minutes on a clean machine (most of it the base images and the image build).

    cd integration && python3 -m unittest -v test_compose
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

from lib.harness import ROOT, http, sse_events, wait_until

COMPOSE_FILE = os.path.join(ROOT, "compose", "docker-compose.yaml")
KEY = "ipk-demo-team-a-7f3c9e2b51d04a68"  # examples/tenants/keys.yaml
ADMIN_TOKEN = next(line.strip() for line in open(os.path.join(ROOT, "compose", "admin-token"))
                   if line.strip() and not line.startswith("#"))
HOST_PORTS = ("API", "DECIDER", "GATEWAY", "COLLECTOR", "AGGREGATOR", "POLICY", "EXPORTER",
              "PROMETHEUS", "SIM0", "SIM1", "SIM2", "SIM3", "GRAFANA")
SERVICES = ("sim0", "sim1", "sim2", "sim3", "policy", "aggregator", "collector", "decider",
            "exporter", "gateway", "front", "prometheus")
WORKERS = ("w0", "w1", "w2", "w3")


def log(msg):
    sys.stderr.write("test_compose: %s\n" % msg)
    sys.stderr.flush()


def metric_sum(text, name, labels=""):
    """Sum of the series `name` whose labels contain `labels` (0 when there is none)."""
    total = 0.0
    for m in re.finditer(r"^%s(\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M):
        if labels in (m.group(1) or ""):
            total += float(m.group(2))
    return total


class TestCompose(unittest.TestCase):
    timings = {}

    # ---- set-up: Docker, the base images, the images (all the project's own scripts) --------
    @classmethod
    def setUpClass(cls):
        # Under /tmp, not $TMPDIR: dockerd's and containerd's sockets live in there, and a unix
        # socket's path has at most 107 bytes.
        cls.dir = tempfile.mkdtemp(prefix="ipl-docker-", dir="/tmp" if os.path.isdir("/tmp") else None)
        cls.tag = uuid.uuid4().hex[:10]
        cls.project = "ipltest%s" % cls.tag
        cls.image = "inferplane:test-%s" % cls.tag
        cls.ops_image = "inferplane-ops:test-%s" % cls.tag
        cls.env = dict(os.environ)
        cls.env.update({"INFERPLANE_DOCKER_DIR": os.path.join(cls.dir, "d"),
                        "COMPOSE_PROJECT_NAME": cls.project,
                        "INFERPLANE_IMAGE": cls.image, "INFERPLANE_OPS_IMAGE": cls.ops_image,
                        "IMAGE": cls.image, "OPS_IMAGE": cls.ops_image,
                        "INFERPLANE_BIND": "127.0.0.1", "COMPOSE_HTTP_TIMEOUT": "300"})
        for p in HOST_PORTS:
            cls.env["INFERPLANE_PORT_" + p] = ""  # a free host port each
        cls.built = False
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(ROOT, "tools", "deps-docker.sh")], cwd=ROOT, env=cls.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1200)
        cls.timings["deps-docker.sh (packages, dockerd, base images)"] = time.monotonic() - t0
        if r.returncode == 3:
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise unittest.SkipTest("no Docker engine can start here: " + r.stderr.strip()[-600:])
        if r.returncode != 0:
            cls._stop_docker()
            raise AssertionError("tools/deps-docker.sh failed (exit %d):\n%s"
                                 % (r.returncode, r.stderr[-3000:]))
        m = re.search(r"DOCKER_HOST=(\S+)", r.stdout)
        assert m, "deps-docker.sh printed no DOCKER_HOST: %r" % r.stdout
        cls.env["DOCKER_HOST"] = m.group(1)
        cls.private = cls.env["DOCKER_HOST"].startswith("unix://" + cls.dir)
        log("Docker at %s (%s)" % (cls.env["DOCKER_HOST"],
                                   "started for this test" if cls.private else "already running"))
        t0 = time.monotonic()
        r = subprocess.run(["make", "--no-print-directory", "image", "IMAGE=" + cls.image,
                            "OPS_IMAGE=" + cls.ops_image], cwd=ROOT, env=cls.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
        cls.timings["make image (both images, programs compiled from source)"] = \
            time.monotonic() - t0
        cls.build_log = r.stdout
        if r.returncode != 0:
            cls.tearDownClass()
            raise AssertionError("make image failed (exit %d):\n%s" % (r.returncode, r.stdout[-4000:]))
        cls.built = True

    @classmethod
    def _stop_docker(cls):
        if getattr(cls, "private", True):
            subprocess.run([os.path.join(ROOT, "tools", "deps-docker.sh"), "--stop"], cwd=ROOT,
                           env=cls.env, timeout=120)
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.compose("down", "-v", "--remove-orphans", "--timeout", "5", check=False)
            if not cls.private:  # a shared engine keeps its base images, not ours
                cls.docker("rmi", "-f", cls.image, cls.ops_image, check=False)
        finally:
            t0 = time.monotonic()
            cls._stop_docker()
            cls.timings["clean-up (down, dockerd stopped, its folder removed)"] = \
                time.monotonic() - t0
            for k, v in cls.timings.items():
                log("%-60s %6.1f s" % (k, v))

    def setUp(self):
        self._t0 = time.monotonic()

    def tearDown(self):
        self.timings[self.id().rsplit(".", 1)[-1]] = time.monotonic() - self._t0

    # ---- helpers -------------------------------------------------------------------------------
    @classmethod
    def docker(cls, *args, check=True, timeout=120):
        r = subprocess.run(["docker"] + list(args), env=cls.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("docker %s failed (exit %d): %s"
                                 % (" ".join(args), r.returncode, r.stderr[-2000:]))
        return r.stdout

    @classmethod
    def compose(cls, *args, check=True, timeout=300):
        r = subprocess.run(["docker-compose", "-p", cls.project, "-f", COMPOSE_FILE] + list(args),
                           env=cls.env, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("docker-compose %s failed (exit %d): %s"
                                 % (" ".join(args), r.returncode, r.stderr[-3000:]))
        return r.stdout

    def stack(self, *args, timeout=300):
        """compose/stack (what make compose-up / compose-down run)."""
        r = subprocess.run([os.path.join(ROOT, "compose", "stack")] + list(args), env=self.env,
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        self.assertEqual(r.returncode, 0, "compose/stack %s:\n%s" % (" ".join(args), r.stdout[-4000:]))
        return r.stdout

    # (docker itself, not docker-compose, answers these: it starts in milliseconds, not seconds)
    def ids(self, service=None):
        f = ["--filter", "label=com.docker.compose.project=" + self.project]
        if service:
            f += ["--filter", "label=com.docker.compose.service=" + service]
        return self.docker("ps", "-aq", *f).split()

    def url(self, service, port, index=1):
        """http://127.0.0.1:HOSTPORT of a container port, of replica `index` of a service."""
        for cid in self.ids(service):
            doc = json.loads(self.docker("inspect", cid))[0]
            if doc["Config"]["Labels"].get("com.docker.compose.container-number") != str(index):
                continue
            bound = (doc["NetworkSettings"]["Ports"] or {}).get("%d/tcp" % port) or []
            self.assertEqual(len(bound), 1, "%s:%d is published once: %s" % (service, port, bound))
            self.assertEqual(bound[0]["HostIp"], "127.0.0.1", "published on 127.0.0.1 only")
            return "http://127.0.0.1:%s" % bound[0]["HostPort"]
        self.fail("no replica %d of %s" % (index, service))

    def containers(self, service=None):
        """{name: (state, health)} of the project's containers (of one service)."""
        ids = self.ids(service)
        if not ids:
            return {}
        out = self.docker("inspect", "-f", "{{.Name}} {{.State.Status}} "
                          "{{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}}", *ids)
        return {n.lstrip("/"): (s, h) for n, s, h in (line.split() for line in out.splitlines())}

    def wait_healthy(self, timeout=120):
        def healthy():
            c = self.containers()
            bad = {n: v for n, v in c.items() if v[0] != "running" or v[1] not in ("healthy", "-")}
            dead = [n for n, v in bad.items() if v[0] in ("exited", "dead")]
            if dead:
                raise AssertionError("exited: %s\n%s" % (dead, self.compose("logs", "--tail=30")))
            return c and not bad and c
        return wait_until(healthy, timeout, interval=1.0, what="every container healthy")

    def logs(self):
        return self.compose("logs", "--no-color", "--tail=40", check=False)[-12000:]

    def chat(self, base, content, stream=True, max_tokens=4, timeout=20):
        body = {"model": "sim-model", "stream": stream, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": content}]}
        return http("POST", base + "/v1/chat/completions", body,
                    {"Authorization": "Bearer " + KEY}, timeout=timeout)

    def chat_ok(self, base, content, **kw):
        """A chat that succeeds, retried on 503 while the first load samples arrive."""
        def attempt():
            status, hdrs, raw = self.chat(base, content, **kw)
            if status == 503:
                return None
            return status, {k.lower(): v for k, v in hdrs.items()}, raw
        status, hdrs, raw = wait_until(attempt, 30, interval=0.5, what="a chat via " + base)
        self.assertEqual(status, 200, raw[:600])
        return hdrs, raw

    def decider_exec(self, name, method, path, body=None):
        """An admin request inside a decider's container (its loopback, with the admin token):
        works whether or not the service requires the token from other addresses."""
        args = ["exec", name, "curl", "-sS", "--max-time", "5", "-X", method,
                "-H", "Authorization: Bearer " + ADMIN_TOKEN, "http://127.0.0.1:9104" + path]
        if body is not None:
            args[-1:-1] = ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
        return json.loads(self.docker(*args, timeout=30))

    # ---- 1. the image -------------------------------------------------------------------------
    def test_1_image_builds_from_the_repository(self):
        self.assertTrue(self.built)
        self.assertRegex(self.build_log, r"CC services/gateway/main\.c",
                         "the programs are compiled inside the image build")
        info = json.loads(self.docker("image", "inspect", self.image))[0]["Config"]
        self.assertEqual(info["User"], "10001:10001", "a non-root user")
        self.assertEqual(info["Entrypoint"], ["inferplane-entrypoint"])
        self.assertIn("inferplane-healthcheck", " ".join(info["Healthcheck"]["Test"]))
        progs = subprocess.run(["make", "-s", "--eval=print-programs: ; @echo $(BINS)",
                                "print-programs"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                               check=True).stdout.split()
        names = [os.path.basename(p) for p in progs]
        self.assertIn("inferplane-gateway", names)
        script = ("set -e; id -u; for p in %s; do command -v $p >/dev/null || echo MISSING $p; "
                  "ldd /usr/local/bin/$p | grep 'not found' || true; done; "
                  "command -v gcc cc make || true; ls /usr/include 2>/dev/null | wc -l; "
                  "inferplane-gateway --version" % " ".join(names))
        out = self.docker("run", "--rm", "--network", "none", "--entrypoint", "bash", self.image,
                          "-c", script)
        lines = out.split("\n")
        self.assertEqual(lines[0], "10001")
        self.assertNotIn("MISSING", out, "every program of the Makefile is in the image")
        self.assertNotIn("not found", out, "every shared library is there")
        self.assertNotRegex(out, r"/usr/bin/(gcc|cc|make)\b", "no compiler in the runtime image")
        self.assertIn("\n0\n", out, "no headers in the runtime image")
        self.assertRegex(out, r"inferplane-gateway \S+", out)
        # The entrypoint runs a plain command as it is (exec: no shell left in between).
        out = self.docker("run", "--rm", "--network", "none", self.image, "inferplanectl",
                          "--version")
        self.assertIn("inferplanectl", out)
        ops = self.docker("run", "--rm", "--network", "none", "--user", "prometheus",
                          self.ops_image, "sh", "-c", "prometheus --version 2>&1 | head -1; "
                          "nginx -v 2>&1")
        self.assertIn("prometheus, version", ops)
        self.assertIn("nginx version", ops)

    # ---- 2. docker-compose up ------------------------------------------------------------------
    def test_2_up_serves_a_streamed_chat_with_cache_aware_routing(self):
        self.assertTrue(self.built)
        t0 = time.monotonic()
        self.compose("up", "-d")
        c = self.wait_healthy()
        self.timings["docker-compose up until every container is healthy"] = time.monotonic() - t0
        services = sorted({re.sub(r"^%s_(.*)_\d+$" % self.project, r"\1", n) for n in c})
        self.assertEqual(services, sorted(SERVICES))
        # Every admin endpoint of `make run`, on a host port (here a free one).
        for svc, port in (("collector", 9101), ("aggregator", 9102), ("policy", 9103),
                          ("front", 9104), ("exporter", 9105), ("front", 9106)):
            u = self.url(svc, port)
            wait_until(lambda: http("GET", u + "/readyz")[0] == 200, 30, 0.5,
                       what="%s:%d/readyz" % (svc, port))
        for i in range(4):
            self.assertEqual(http("GET", self.url("sim%d" % i, 8000) + "/health")[0], 200)

        api = self.url("front", 8080)
        prompt = ("You are a careful assistant for the compose test. " * 12 +
                  "Question %s: what is a KV cache?" % self.tag)
        hdrs, raw = self.chat_ok(api, prompt)
        events = sse_events(raw)
        self.assertGreater(len(events), 2, raw[:400])
        self.assertEqual(events[-1], "[DONE]")
        self.assertTrue(hdrs["content-type"].startswith("text/event-stream"))
        first = hdrs.get("x-inferplane-worker")
        self.assertIn(first, WORKERS, hdrs)
        self.assertTrue(hdrs.get("x-inferplane-reason"), hdrs)
        # The same prompt again: the worker that now holds its prefix (its KV events went
        # sim → collector → aggregator → decider across four containers).
        def cached():
            h, _ = self.chat_ok(api, prompt)
            return h if h.get("x-inferplane-reason") == "cache_hit" else None
        h2 = wait_until(cached, 15, 0.3, what="a cache_hit for the repeated prompt")
        self.assertEqual(h2["x-inferplane-worker"], first, h2)
        self.assertGreater(int(h2["x-inferplane-cached-tokens"]), 100, h2)
        # What the exporter saw, at :9105 as in `make run`.
        m = http("GET", self.url("exporter", 9105) + "/metrics")[2].decode()
        self.assertGreaterEqual(metric_sum(m, "inferplane_requests_total"), 2)

    # ---- 3. --scale decider=3 --scale gateway=2 ------------------------------------------------
    def test_3_scaled_replicas_serve_and_share_state(self):
        self.assertTrue(self.built)
        # Load samples every 10 min, so that a routing stays "in flight" at every decider
        # (until a newer sample or 10 s): what they agree on below is then exact.
        self.env["INFERPLANE_SCRAPE_INTERVAL_MS"] = "600000"
        t0 = time.monotonic()
        self.stack("up", "decider=3", "gateway=2")
        self.timings["compose/stack up decider=3 gateway=2 (healthy)"] = time.monotonic() - t0
        deciders = sorted(self.containers("decider"))
        gateways = sorted(self.containers("gateway"))
        self.assertEqual(len(deciders), 3, deciders)
        self.assertEqual(len(gateways), 2, gateways)
        dmetrics = [self.url("decider", 9104, i + 1) + "/metrics" for i in range(3)]
        gw = [self.url("gateway", 8080, i + 1) for i in range(2)]
        gadmin = [self.url("gateway", 9106, i + 1) for i in range(2)]

        # Each decider subscribed to the other two; each gateway counts two replicas.
        def meshed():
            for d in deciders:
                peers = self.decider_exec(d, "GET", "/debug/state")["peers"]["peers"]
                if len(peers) != 2:
                    return None
            return True
        wait_until(meshed, 60, 1.0, what="every decider listing the other two as --peers")
        for a in gadmin:
            wait_until(lambda: http("GET", a + "/readyz")[0] == 200, 30, 0.5, what=a)
            wait_until(lambda: metric_sum(http("GET", a + "/metrics")[2].decode(),
                                          "inferplane_gateway_limits_replicas") >= 2
                       and metric_sum(http("GET", a + "/metrics")[2].decode(),
                                      "inferplane_gateway_limits_gossip_received_total") > 0,
                       30, 0.5, what="limits gossip at " + a)
        for u in dmetrics:
            wait_until(lambda: http("GET", u.replace("/metrics", "/readyz"))[0] == 200, 30, 0.5,
                       what=u)

        def peer_counts():
            out = []
            for u in dmetrics:
                m = http("GET", u)[2].decode()
                out.append((metric_sum(m, "inferplane_decider_peer_routed_total", 'event="sent"'),
                            metric_sum(m, "inferplane_decider_peer_routed_total",
                                       'event="received"')))
            return out
        base_counts = peer_counts()

        # A burst through both gateway replicas, 12 distinct prompts, 4 at a time.
        routed = {w: 0 for w in WORKERS}
        errors = []
        lock = threading.Lock()

        def one(k):
            try:
                hdrs, _ = self.chat_ok(gw[k % 2], "burst %s %d: " % (self.tag, k) + "tell me more. " * 20,
                                       stream=False)
                with lock:
                    routed[hdrs["x-inferplane-worker"]] += 1
            except Exception as e:  # reported below
                errors.append(repr(e))
        t_burst = time.monotonic()
        for batch in range(3):
            ts = [threading.Thread(target=one, args=(batch * 4 + j,)) for j in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(40)
        self.assertEqual(errors, [])
        self.assertEqual(sum(routed.values()), 12, routed)

        # Every routing, whichever decider made it, has reached the other two.
        total = 12

        def converged():
            c = peer_counts()
            sent = sum(s - base_counts[i][0] for i, (s, _) in enumerate(c))
            ok = sent == total and all((s - base_counts[i][0]) + (r - base_counts[i][1]) == total
                                       for i, (s, r) in enumerate(c))
            return c if ok else None
        c = wait_until(converged, 5, 0.1, what="every decider applying all %d routings" % total)
        routers = sum(1 for i, (s, _) in enumerate(c) if s > base_counts[i][0])
        log("the burst was routed by %d of the 3 deciders: %s" % (routers, routed))
        # ... and they agree on the in-flight load: POST /v1/route on each (inside its container)
        # lists every worker's in-flight count. Each probe is a routing too, seen by the next.
        expected = dict(routed)
        probe = {"model": "sim-model", "prompt": "probe %s" % self.tag}
        for i, d in enumerate(deciders):
            if i:
                def applied():
                    cc = peer_counts()
                    return all((s - base_counts[j][0]) + (r - base_counts[j][1]) == total
                               for j, (s, r) in enumerate(cc))
                wait_until(applied, 5, 0.1, what="the previous probe at every decider")
            doc = self.decider_exec(d, "POST", "/v1/route", probe)
            seen = {c["worker"]: c["inflight"] for c in doc["candidates"]}
            self.assertEqual(seen, expected, "decider %s (%d of 3) in flight" % (d, i + 1))
            expected[doc["worker"]] += 1
            total += 1
        self.assertLess(time.monotonic() - t_burst, 10.0,
                        "all within the 10 s a routing counts as in flight")

        # The front spreads over both gateway replicas.
        before = [metric_sum(http("GET", a + "/metrics")[2].decode(),
                             "inferplane_gateway_requests_total") for a in gadmin]
        api = self.url("front", 8080)
        for k in range(6):
            self.chat_ok(api, "front %s %d" % (self.tag, k), stream=True)
        after = [metric_sum(http("GET", a + "/metrics")[2].decode(),
                            "inferplane_gateway_requests_total") for a in gadmin]
        self.assertTrue(all(b > a for a, b in zip(before, after)),
                        "each gateway replica served some of the front's requests: %s -> %s"
                        % (before, after))
        # Prometheus found every replica by DNS and scrapes them all.
        prom = self.url("prometheus", 9090)

        def targets():
            doc = json.loads(http("GET", prom + "/api/v1/targets?state=active")[2])
            up = {}
            for t in doc["data"]["activeTargets"]:
                if t["health"] == "up":
                    up[t["labels"]["job"]] = up.get(t["labels"]["job"], 0) + 1
            return up if up.get("decider") == 3 and up.get("gateway") == 2 and \
                up.get("sim") == 4 else None
        wait_until(targets, 40, 1.0, what="Prometheus scraping 3 deciders, 2 gateways, 4 sims")
        rules = json.loads(http("GET", prom + "/api/v1/rules")[2])["data"]["groups"]
        self.assertGreater(sum(len(g["rules"]) for g in rules), 10, "inferplane's rules are loaded")

    # ---- 4. docker-compose down ----------------------------------------------------------------
    def test_4_down_leaves_nothing(self):
        self.assertTrue(self.built)
        if not self.containers():
            self.compose("up", "-d")
            self.wait_healthy()
        api = self.url("front", 8080)
        t0 = time.monotonic()
        self.stack("down")
        self.timings["compose/stack down"] = time.monotonic() - t0
        label = "label=com.docker.compose.project=" + self.project
        self.assertEqual(self.ids(), [])
        self.assertEqual(self.docker("network", "ls", "-q", "--filter", label).split(), [])
        self.assertEqual(self.docker("volume", "ls", "-q", "--filter", label).split(), [])
        with self.assertRaises(OSError):
            http("GET", api + "/v1/models", timeout=2)


if __name__ == "__main__":
    unittest.main()
