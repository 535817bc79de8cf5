"""Tenants through real processes: the gateway's --keys-file (libs/tenants), the exporter's
per-tenant series, a policy rule on a tenant, and the official openai client with a key.

    cd integration && python3 -m unittest -v test_tenants
"""
import json
import os
import shutil
import subprocess
import unittest

from lib.harness import Stack, http_json, requires, wait_until
from test_exporter import metric, scrape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_OPENAI = os.path.join(ROOT, "tools", "node", "node_modules", "openai")

KEY_A = "ipk-test-team-a-6b1f0c9d2e7a4853"
KEY_B = "ipk-test-team-b-93d0a8e1c47f2b65"
KEY_C = "ipk-test-team-c-1a2b3c4d5e6f7081"  # disabled
KEY_D = "ipk-test-team-d-f0e1d2c3b4a59687"  # added later
CHAT = {"model": "sim-model", "max_tokens": 3,
        "messages": [{"role": "user", "content": "Hello there, how are you?"}]}

KEYS = """tenants:
  - {name: team-a, keys: ["%s"]}
  - {name: team-b, keys: ["%s"]}
  - {name: team-c, disabled: true, keys: ["%s"]}
""" % (KEY_A, KEY_B, KEY_C)

POLICY = """apiVersion: inferplane.io/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: sim-model
  blockSize: 16
  workers:
    - {name: w0, url: "%s", kvEvents: "%s", replay: "%s"}
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePool
metadata: {name: chat}
spec:
  model: sim-model
  targets: [{workerSet: sims}]
---
apiVersion: inferplane.io/v1alpha1
kind: InferencePolicy
metadata: {name: tenants}
spec:
  rules:
    - name: team-b-long-prompts
      match: {tenants: [team-b], promptTokens: {min: 200}}
      reject: {status: 413, reason: "team-b may send prompts of at most 200 tokens"}
    - name: no-bluebird
      match: {labels: [project-bluebird]}
      reject: {status: 403, reason: "project bluebird is not served here"}
  labels:
    rules:
      - {label: project-bluebird, keywords: [bluebird]}
"""


def bearer(key):
    return {"Authorization": "Bearer " + key}


class TestTenants(unittest.TestCase):
    def start(self, *gateway_args):
        st = self.st = Stack(self)
        sim = st.start_sim("w0")
        st.write("policy/p.yaml", POLICY % (sim.url, sim.kv, sim.replay))
        self.keys = st.write("keys.yaml", KEYS)
        self.gw = st.start_chain(os.path.join(st.dir, "policy"),
                                 ["--keys-file", self.keys] + list(gateway_args))
        self.exporter = self.gw.exporter
        self.api = self.gw.api
        wait_until(lambda: self.chat(KEY_A)[0] == 200, 15, 0.2, "the first request")

    def chat(self, key=None, headers=None, body=CHAT):
        h = dict(bearer(key) if key else {})
        h.update(headers or {})
        return http_json("POST", self.api + "/v1/chat/completions", body, h)

    def requests_of(self, tenant):
        """inferplane_requests_total of `tenant` at the exporter (every label set summed)."""
        return metric(scrape(self.exporter.admin_url), "inferplane_requests_total", tenant=tenant)

    def test_keys_decide_the_tenant(self):
        self.start()
        # missing, unknown, disabled: the OpenAI error shape, never the key
        for key, headers, status, code in ((None, {}, 401, "missing_api_key"),
                                           ("ipk-not-a-key-0000000000", {}, 401,
                                            "invalid_api_key"),
                                           (KEY_C, {}, 403, "tenant_disabled")):
            st, _, doc = self.chat(key, headers)
            self.assertEqual(st, status, doc)
            self.assertEqual(doc["error"]["code"], code, doc)
            self.assertIn("type", doc["error"])
            self.assertNotIn("ipk-", json.dumps(doc))
        st, _, doc = http_json("GET", self.api + "/v1/models")
        self.assertEqual(st, 401, doc)
        st, _, doc = http_json("GET", self.api + "/v1/models", headers={"x-api-key": KEY_B})
        self.assertEqual((st, [m["id"] for m in doc["data"]]), (200, ["sim-model"]), doc)
        # x-api-key works as Authorization does
        st, _, doc = self.chat(headers={"x-api-key": KEY_B})
        self.assertEqual(st, 200, doc)
        # Records reach the exporter asynchronously: wait for team-b's before counting from it
        # (CI once read 0 here and 1 after the loop below).
        wait_until(lambda: self.requests_of("team-b") >= 1, 5, what="team-b's record")

        # Isolation: team-a's requests are counted as team-a only, even when it claims to be
        # team-b through a header nobody trusts.
        before_a, before_b = self.requests_of("team-a"), self.requests_of("team-b")
        for _ in range(3):
            st, _, doc = self.chat(KEY_A, {"x-inferplane-tenant": "team-b"})
            self.assertEqual(st, 200, doc)
        wait_until(lambda: self.requests_of("team-a") >= before_a + 3, 5,
                   what="team-a's records at the exporter")
        self.assertEqual(self.requests_of("team-b"), before_b)
        # The tenant reaches the decider: a rule on team-b applies to team-b's key only.
        long_body = dict(CHAT, messages=[{"role": "user", "content": "word " * 400}])
        st, hdrs, doc = self.chat(KEY_B, body=long_body)
        self.assertEqual(st, 413, doc)
        self.assertIn("at most 200 tokens", doc["error"]["message"])
        self.assertEqual(hdrs.get("x-inferplane-rule"), "tenants/team-b-long-prompts")
        st, _, doc = self.chat(KEY_A, body=long_body)
        self.assertEqual(st, 200, doc)
        # An operator's label (spec.labels keyword rule), computed by the gateway, decides too.
        st, hdrs, doc = self.chat(KEY_A, body=dict(CHAT, messages=[
            {"role": "user", "content": "What is the status of Bluebird?"}]))
        self.assertEqual(st, 403, doc)
        self.assertEqual(hdrs.get("x-inferplane-rule"), "tenants/no-bluebird")
        st, _, doc = self.chat(KEY_A, body=dict(CHAT, messages=[
            {"role": "user", "content": "What is the status of the bluebirds' nest?"}]))
        self.assertEqual(st, 200, doc)  # whole words only
        # and the gateway's admin says what it holds, names and counts only
        st, _, info = http_json("GET", self.gw.admin_url + "/debug/tenants")
        self.assertEqual((info["mode"], info["tenants"], info["keys"]), ("keys", 3, 3), info)
        self.assertNotIn("ipk-", json.dumps(info))
        self.assertNotIn("ipk-", self.gw.log())

    def test_a_key_added_to_the_file_works_without_a_restart(self):
        self.start()
        self.assertEqual(self.chat(KEY_D)[0], 401)
        with open(self.keys + ".tmp", "w") as f:
            f.write(KEYS + '  - {name: team-d, keys: ["%s"]}\n' % KEY_D)
        os.rename(self.keys + ".tmp", self.keys)
        wait_until(lambda: self.chat(KEY_D)[0] == 200, 5, 0.1, "the new key to work")
        # an invalid change keeps the last good table, and the admin endpoint says why
        with open(self.keys + ".tmp", "w") as f:
            f.write(KEYS + "  - {name: team-e, keys: [short]}\n")
        os.rename(self.keys + ".tmp", self.keys)
        wait_until(lambda: http_json("GET", self.gw.admin_url + "/debug/tenants")[2]
                   ["failed_reloads"] == 1, 5, 0.1, "the rejected reload")
        info = http_json("GET", self.gw.admin_url + "/debug/tenants")[2]
        self.assertIn("keys.yaml:5:", info["last_error"])
        self.assertEqual(self.chat(KEY_D)[0], 200)
        self.assertEqual(self.chat(KEY_A)[0], 200)

    def test_a_trusted_header_names_the_tenant(self):
        self.start("--trusted-tenant-header", "x-forwarded-tenant")
        before = self.requests_of("proxy-tenant")
        st, _, doc = self.chat(headers={"x-forwarded-tenant": "proxy-tenant"})  # no key needed
        self.assertEqual(st, 200, doc)
        wait_until(lambda: self.requests_of("proxy-tenant") == before + 1, 5,
                   what="the proxy's tenant at the exporter")
        st, _, doc = self.chat(headers={"x-forwarded-tenant": "bad tenant!"})
        self.assertEqual(st, 400, doc)
        self.assertEqual(self.chat()[0], 401)  # without the header, a key is needed

    @requires(os.path.isdir(NODE_OPENAI) and shutil.which("node"),
              "node and the openai npm package (%s)" % NODE_OPENAI)
    def test_official_openai_client_with_a_key(self):
        self.start()
        script = """
const OpenAI = require(%s);
(async () => {
  const c = new OpenAI({apiKey: %s, baseURL: %s, maxRetries: 0});
  const models = (await c.models.list()).data.map(m => m.id);
  const r = await c.chat.completions.create({model: "sim-model", max_tokens: 3,
    messages: [{role: "user", content: "hi"}]});
  let status = 0, type = "";
  try {
    await new OpenAI({apiKey: "ipk-wrong-000000000000", baseURL: %s, maxRetries: 0})
      .chat.completions.create({model: "sim-model", messages: [{role: "user", content: "x"}]});
  } catch (e) { status = e.status; type = e.constructor.name; }
  console.log(JSON.stringify({models, tokens: r.usage.completion_tokens, status, type}));
})().catch(e => { console.error(e); process.exit(1); });
""" % (json.dumps(NODE_OPENAI), json.dumps(KEY_A), json.dumps(self.api + "/v1"),
       json.dumps(self.api + "/v1"))
        out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        res = json.loads(out.stdout)
        self.assertEqual(res["models"], ["sim-model"])
        self.assertEqual(res["tokens"], 3)
        self.assertEqual((res["status"], res["type"]), (401, "AuthenticationError"))


if __name__ == "__main__":
    unittest.main()
