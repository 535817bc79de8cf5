"""One tenant must not learn another's prompts from the cache (issue 20, defect 6), black-box on
real processes over loopback (simulated vLLM workers that cache by cache_salt as vLLM does):

  - the response headers that say where a request went and what was cached for it
    (x-inferplane-worker, -endpoint, -reason, -predicted-ttft-ms, -cached-tokens) are not sent
    unless the operator turns them on (--expose-routing-headers);
  - tenants the policy isolates (InferencePolicy spec.cacheIsolation.tenants) get a cache_salt
    of their own: another tenant sending the very same prompt gets no cached token from the
    worker, no predicted hit from the decider and no hint in the headers; the tenant's own
    repeat is an exact hit (routed by its salted blocks, cached at the worker); the decider's
    POST /v1/route hashes as the gateway does, so it shows no other tenant's blocks either;
  - tenants not listed share one cache as before;
  - a client cannot pick a salt in the gateway's reserved space (400).

    cd integration && python3 -m unittest -v test_cache_isolation
"""
import json
import os
import random
import unittest

from lib.cluster import MODEL, policy_yaml
from lib.harness import Stack, http, http_json, wait_until

ROUTING = ("x-inferplane-worker", "x-inferplane-endpoint", "x-inferplane-reason",
           "x-inferplane-predicted-ttft-ms", "x-inferplane-cached-tokens")
KEYS = {t: "ipk-it-%s-5c0ffee5c0ffee00" % t for t in ("team-a", "team-b", "team-c", "team-d")}
WORDS = ("amber basil cedar dahlia ember fennel ginger hazel iris juniper kale lotus mint "
         "nutmeg olive pepper quince rose sage thyme umber violet willow yarrow zinnia").split()


def text(seed, n):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def lower(hdrs):
    return {k.lower(): v for k, v in hdrs.items()}


class TestCacheIsolation(unittest.TestCase):
    def complete(self, gw, tenant, prompt, **extra):
        body = dict({"model": MODEL, "prompt": prompt, "max_tokens": 2}, **extra)
        hdrs = {"Authorization": "Bearer " + KEYS[tenant]} if tenant else {}
        status, h, raw = http("POST", gw.api + "/v1/completions", body, headers=hdrs)
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        return status, lower(h), doc

    @staticmethod
    def worker_cached(doc):
        """What the worker itself says it had cached (vLLM's prompt_tokens_details)."""
        return ((doc.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)

    def test_routing_headers_are_not_sent_unless_enabled(self):
        st = Stack(self, routing_headers=False)
        sim = st.start_sim("w0")
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml([sim])))
        gw = st.start_chain(pdir)
        wait_until(lambda: self.complete(gw, None, "hello")[0] == 200, 15, what="a completion")
        status, hdrs, doc = self.complete(gw, None, text(1, 300))
        self.assertEqual(status, 200, doc)
        for name in ROUTING:
            self.assertNotIn(name, hdrs, hdrs)
        self.assertIn("x-request-id", hdrs)
        self.assertEqual(hdrs.get("x-inferplane-pool"), "chat")
        # The operator's switch brings them back (a second gateway on the same chain).
        gw2 = st.add_gateway(gw, ["--expose-routing-headers"])
        status, hdrs, doc = self.complete(gw2, None, text(1, 300))
        self.assertEqual(status, 200, doc)
        for name in ROUTING:
            self.assertIn(name, hdrs, hdrs)
        self.assertEqual(hdrs["x-inferplane-worker"], "w0")

    def test_isolated_tenants_share_nothing(self):
        st = Stack(self)
        sims = [st.start_sim("w%d" % i, extra=["--seed", str(i)]) for i in range(2)]
        isolation = "\n".join([
            "---", "apiVersion: inferplane.io/v1alpha1", "kind: InferencePolicy",
            "metadata: {name: tenants}", "spec:", "  cacheIsolation:",
            "    tenants: [team-a, team-b]", ""])
        pdir = os.path.dirname(st.write("policy/p.yaml", policy_yaml(sims) + isolation))
        keys = st.write("keys.yaml", "tenants:\n" + "".join(
            "  - {name: %s, keys: [\"%s\"]}\n" % kv for kv in sorted(KEYS.items())))
        # No optimistic blocks (what the decider routed a moment ago): every predicted hit then
        # comes from the index the collector built from the workers' KV events.
        gw = st.start_chain(pdir, ["--keys-file", keys], decider_args=["--optimistic-ttl-ms", "0"])
        decider = next(p for p in st.procs if p.name == "decider")
        wait_until(lambda: self.complete(gw, "team-c", "hello")[0] == 200, 15, what="a completion")

        def route(tenant, prompt):
            status, _, doc = http_json("POST", decider.admin_url + "/v1/route",
                                       {"model": MODEL, "prompt": prompt, "tenant": tenant})
            self.assertEqual(status, 200, doc)
            return doc

        # team-a's prompt, cached at the worker under team-a's salt and indexed in its space.
        secret = "team-a's confidential plan: " + text(7, 400)
        status, hdrs, doc = self.complete(gw, "team-a", secret)
        self.assertEqual(status, 200, doc)
        n = doc["usage"]["prompt_tokens"]
        self.assertGreater(n, 200)
        self.assertEqual(self.worker_cached(doc), 0)
        wait_until(lambda: route("team-a", secret)["cached_tokens"] >= n - 32, 15,
                   what="team-a's blocks indexed in its own hash space")

        # team-b guesses the prompt right: nothing from the decider, the worker or the headers
        # (its own repeat would hit its own cache: team-b is isolated too).
        for tenant in ("team-b", "team-c", ""):
            doc = route(tenant, secret)
            self.assertEqual([c["cached_tokens"] for c in doc["candidates"]], [0, 0], doc)
        status, hdrs, doc = self.complete(gw, "team-b", secret)
        self.assertEqual(status, 200, doc)
        self.assertEqual(self.worker_cached(doc), 0, doc["usage"])
        self.assertEqual(int(hdrs["x-inferplane-cached-tokens"]), 0, hdrs)
        self.assertNotEqual(hdrs["x-inferplane-reason"], "cache_hit", hdrs)
        # Nor a shared tenant, nor anyone naming team-a's salt: the gateway's space is its own.
        status, hdrs, doc = self.complete(gw, "team-c", secret)
        self.assertEqual(self.worker_cached(doc), 0, doc["usage"])
        self.assertEqual(int(hdrs["x-inferplane-cached-tokens"]), 0, hdrs)
        status, hdrs, doc = self.complete(gw, "team-c", secret,
                                          cache_salt="inferplane-tenant:anything")
        self.assertEqual(status, 400, doc)
        self.assertEqual(doc["error"]["param"], "cache_salt", doc)

        # team-a's own repeat: routed by its salted blocks to the worker that has them, a hit.
        status, hdrs, doc = self.complete(gw, "team-a", secret)
        self.assertEqual(status, 200, doc)
        self.assertEqual(hdrs["x-inferplane-reason"], "cache_hit", hdrs)
        self.assertGreaterEqual(int(hdrs["x-inferplane-cached-tokens"]), n - 32, hdrs)
        self.assertGreaterEqual(self.worker_cached(doc), n - 32, doc["usage"])

        # Tenants not listed share one cache, as without isolation: team-c's prompt is team-d's
        # hit.
        shared = "a shared system prompt: " + text(8, 400)
        status, _, doc = self.complete(gw, "team-c", shared)
        m = doc["usage"]["prompt_tokens"]
        wait_until(lambda: route("team-d", shared)["cached_tokens"] >= m - 32, 15,
                   what="team-c's blocks indexed in the shared space")
        status, hdrs, doc = self.complete(gw, "team-d", shared)
        self.assertEqual(hdrs["x-inferplane-reason"], "cache_hit", hdrs)
        self.assertGreaterEqual(self.worker_cached(doc), m - 32, doc["usage"])
        # ... which an isolated tenant does not get.
        status, hdrs, doc = self.complete(gw, "team-a", shared)
        self.assertEqual(self.worker_cached(doc), 0, doc["usage"])
        self.assertEqual(int(hdrs["x-inferplane-cached-tokens"]), 0, hdrs)


if __name__ == "__main__":
    unittest.main()
