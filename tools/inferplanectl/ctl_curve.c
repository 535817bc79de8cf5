/*
 * inferplanectl curve-keygen DIR — writes the cluster's CURVE certificate (ipl_curve.h):
 * DIR/cluster.key (public) and DIR/cluster.key_secret (0600), for --curve-dir on every
 * process, or a Kubernetes Secret made from the two files:
 *
 *   inferplanectl curve-keygen /tmp/curve
 *   kubectl create secret generic inferplane-curve \
 *       --from-file=/tmp/curve/cluster.key --from-file=/tmp/curve/cluster.key_secret
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ipl_curve.h"
#include "ipl_error.h"

static int s_usage(FILE *out, int rc)
{
    fprintf(out, "usage: inferplanectl curve-keygen [--force] DIR\n"
                 "  writes DIR/" IPL_CURVE_CERT " and DIR/" IPL_CURVE_CERT
                 "_secret, the certificate every process\n"
                 "  of a cluster shares (--curve-dir DIR, INFERPLANE_CURVE_DIR); --force "
                 "replaces one\n");
    return rc;
}

int ctl_curve_keygen(int argc, char **argv)
{
    const char *dir = NULL;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return s_usage(stdout, 0);
        if (!strcmp(argv[i], "--force")) force = true;
        else if (argv[i][0] == '-' || dir) return s_usage(stderr, 2);
        else dir = argv[i];
    }
    if (!dir) return s_usage(stderr, 2);
    char err[4400];
    int rc = ipl_curve_keygen(dir, force, err, sizeof err);
    if (rc != IPL_OK) {
        fprintf(stderr, "inferplanectl %s\n", err);
        return rc == IPL_E_INVAL ? 2 : 1;
    }
    printf("wrote %s/%s and %s/%s_secret\n"
           "use: --curve-dir %s (or INFERPLANE_CURVE_DIR) on every inferplane process; in "
           "Kubernetes:\n"
           "  kubectl create secret generic inferplane-curve --from-file=%s/%s "
           "--from-file=%s/%s_secret\n",
           dir, IPL_CURVE_CERT, dir, IPL_CURVE_CERT, dir, dir, IPL_CURVE_CERT, dir,
           IPL_CURVE_CERT);
    return 0;
}
