"""The cache-aware routing probe of the fault suite: prompts sent through the gateways, whose
responses say which worker served them (x-inferplane-worker, x-inferplane-reason: the fleet's
gateways run with --expose-routing-headers, as harness.Stack starts them) and how many prompt
tokens the worker had cached (usage.prompt_tokens_details.cached_tokens).

A round checks three things:
  fresh     a new prompt through one gateway, then at once through the other: the second must
            land on the first's worker, as a cache hit (reason cache_hit, at least half the
            prompt cached there)
  old       for every worker whose cache survived the fault, one seed prompt it served before
            the fault, last sent at least SEED_AGE_S ago: it must land there again as a hit.
            A seed that lands elsewhere is dropped (it is cached twice now); a worker with no
            seed left fails the round
  new       (after the fault) a new prompt is sent; SEED_AGE_S later it is sent again and must
            land on the same worker as a hit: the KV events of what was stored after the fault
            reach the deciders again
The decider assumes a routed prompt cached for its --optimistic-ttl-ms (up to 1.5 times that);
SEED_AGE_S is beyond it, so "old" and "new" route by the KV-event state alone.

recovery(marks): the time from which at least RECOVERED_SHARE of the checks pass, to the end.
"""
import concurrent.futures
import random
import time

from lib.harness import http_json

from faults.fleet import OPTIMISTIC_TTL_MS

WORDS = ("of", "to", "in", "it", "is", "be", "as", "at", "so", "we", "he", "by", "or", "on",
         "do", "if", "me", "my", "up", "an", "go", "no", "us", "am")
SEED_AGE_S = 1.5 * OPTIMISTIC_TTL_MS / 1000.0 + 0.5
RECOVERED_SHARE = 0.9


class Probe:
    def __init__(self, fleet, seed):
        self.fleet = fleet
        self.rng = random.Random(seed)
        self.old = {}   # worker -> [[prompt, last sent], ...]: seeds from before the fault
        self.new = []   # [prompt, worker or None, sent, passed or None]
        self.turn = 0

    def prompt(self, words=256):
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    def send(self, gw, prompt):
        """One completion of one token. A dict: ok, status, worker, reason, cached, prompt."""
        body = {"model": self.fleet.model, "prompt": prompt, "max_tokens": 1}
        try:
            status, hdrs, doc = http_json("POST", gw.api + "/v1/completions", body, timeout=5)
        except OSError as e:
            return {"ok": False, "error": repr(e)[:200]}
        h = {k.lower(): v for k, v in hdrs.items()}
        usage = (doc or {}).get("usage") or {}
        return {"ok": status == 200, "status": status, "worker": h.get("x-inferplane-worker"),
                "reason": h.get("x-inferplane-reason"),
                "cached": (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
                "prompt": usage.get("prompt_tokens") or 0}

    @staticmethod
    def hit(r, worker):
        return (r["ok"] and r["worker"] == worker and r["reason"] == "cache_hit"
                and r["cached"] >= r["prompt"] // 2)

    def _gateways(self):
        gws = self.fleet.gateways
        self.turn += 1
        return gws[self.turn % 2], gws[(self.turn + 1) % 2]

    def seed(self, n):
        """Sends n seed prompts at once through both gateways; keeps those answered."""
        prompts = [self.prompt() for _ in range(n)]
        gws = self.fleet.gateways
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            res = list(ex.map(lambda i: self.send(gws[i % 2], prompts[i]), range(n)))
        now = time.time()
        self.old = {}
        for p, r in zip(prompts, res):
            if r["ok"] and r["worker"]:
                self.old.setdefault(r["worker"], []).append([p, now])

    def round(self, skip_workers=(), after=False):
        """One round (the module's comment). Returns (passed, detail): passed is whether the
        fresh and old checks passed; the new seeds' results are kept in self.new."""
        a, b = self._gateways()
        p = self.prompt()
        first = self.send(a, p)
        detail = {"fresh": [first]}
        ok = first["ok"]
        if ok:
            second = self.send(b, p)
            detail["fresh"].append(second)
            ok = self.hit(second, first["worker"])
        detail["old"] = {}
        for worker, seeds in sorted(self.old.items()):
            if worker in skip_workers:
                continue
            if not seeds:
                detail["old"][worker] = "no seed left"
                ok = False
                continue
            seeds.sort(key=lambda s: s[1])
            if time.time() - seeds[0][1] < SEED_AGE_S:
                continue  # each was sent too recently to say anything
            s = seeds[0]
            r = self.send(b, s[0])
            s[1] = time.time()
            if not self.hit(r, worker):
                seeds.remove(s)
                detail["old"][worker] = r
                ok = False
        if after:
            now = time.time()
            for s in self.new:
                if s[3] is None and now - s[2] >= SEED_AGE_S:
                    r = self.send(a, s[0])
                    s[3] = self.hit(r, s[1])
                    if not s[3]:
                        detail.setdefault("new", []).append(dict(r, owner=s[1]))
            p = self.prompt()
            t = time.time()
            r = self.send(b, p)
            self.new.append([p, r.get("worker"), t, None if r["ok"] else False])
        return ok, detail

    def new_results(self):
        """[(sent, passed)] of the new seeds checked."""
        return [(t, ok) for _, _, t, ok in self.new if ok is not None]


def recovery(marks, share=RECOVERED_SHARE):
    """The first time t of [(t, passed), ...] (in time order) from which at least `share` of
    the marks pass, with at least two marks from there, or None."""
    for i in range(len(marks) - 1):
        rest = marks[i:]
        if marks[i][1] and sum(1 for _, ok in rest if ok) >= share * len(rest):
            return marks[i][0]
    return None
