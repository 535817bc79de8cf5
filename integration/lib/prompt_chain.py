"""The chain the prompt-path tests run on their own policy directory: policy, aggregator,
collector, decider (with a --tokenizer, for its POST /v1/route, and no optimistic cache, so
that every claimed hit comes from the index the collector built from the workers'
BlockStored events) and gateway (with its own --tokenizer), on ephemeral loopback ports.

    ch = start_prompt_chain(stack, policy_dir, decider_tokenizer, gateway_tokenizer)
    ch.api            # the gateway's API base URL;  ch.gateway, ch.decider: their Procs
"""
import types

from lib.harness import free_port, zmq_endpoint


def start_prompt_chain(st, policy_dir, decider_tokenizer, gateway_tokenizer):
    ep = {k: zmq_endpoint() for k in ("agg_pull", "agg_pub", "agg_snap", "pol_pub",
                                      "pol_rep", "decider", "exp_pull")}
    pol = ["--policy-sub", ep["pol_pub"], "--policy-req", ep["pol_rep"]]
    st.start("policy", ["--dir", policy_dir, "--pub", ep["pol_pub"], "--rep", ep["pol_rep"],
                        "--republish-ms", "500"])
    st.start("aggregator", ["--pull", ep["agg_pull"], "--pub", ep["agg_pub"],
                            "--snapshot", ep["agg_snap"]])
    st.start("collector", ["--aggregator", ep["agg_pull"]] + pol)
    decider = st.start("decider", ["--listen", ep["decider"], "--state-sub", ep["agg_pub"],
                                   "--state-snapshot", ep["agg_snap"], "--optimistic-ttl-ms",
                                   "0", "--tokenizer", decider_tokenizer] + pol)
    st.start("exporter", ["--pull", ep["exp_pull"]])
    port = free_port()
    gateway = st.start("gateway", ["--listen", "127.0.0.1:%d" % port, "--decider",
                                   ep["decider"], "--exporter", ep["exp_pull"], "--tokenizer",
                                   gateway_tokenizer] + pol)
    return types.SimpleNamespace(api="http://127.0.0.1:%d" % port, gateway=gateway,
                                 decider=decider)
