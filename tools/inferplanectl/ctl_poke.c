/*
 * inferplanectl poke — sends malformed input to a ZeroMQ endpoint, for robustness tests:
 * random bytes, truncated and corrupted catalogue messages, wrong versions, absurd declared
 * lengths, empty and multi-frame messages, and (with --socket pub) vLLM-shaped KV-event
 * batches with garbage inside. The target must count and drop them and stay up.
 *
 *   inferplanectl poke --endpoint tcp://127.0.0.1:7001 --socket push --count 200 --seed 1
 *
 * --socket: dealer | req (a DEALER that adds REQ's empty delimiter) | push (connect), pub
 * (binds and publishes, for subscribers that connect), sub (an XSUB that connects to a PUB
 * and sends garbage upstream), raw (random bytes on a plain TCP connection, no ZMTP).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "ctl.h"
#include "ipl_proto.h"

static uint64_t s_rng;

static uint64_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

/* One frame meant to be malformed into buf (capacity >= 1024); returns its length. A
 * catalogue message cut before its optional trailing fields, or with a flipped byte, may still
 * decode: s_frame checks. */
static size_t s_frame_try(uint8_t *buf, size_t cap)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t len = 0;
    switch (s_rand() % 8) {
    case 0: /* random bytes */
        len = s_rand() % 512;
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)s_rand();
        return len;
    case 1: { /* a real message, truncated */
        size_t n;
        const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
        ipl_msg_t zero;
        memset(&zero, 0, sizeof zero);
        ipl_msg_encode(msgs[s_rand() % n].type, &zero.u, &sb);
        len = sb.size > 1 ? s_rand() % (sb.size - 1) : 0;
        break;
    }
    case 2: /* unknown version */
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint64(&pk, 99);
        msgpack_pack_uint64(&pk, 1);
        msgpack_pack_nil(&pk);
        len = sb.size;
        break;
    case 3: /* absurd declared lengths */
        msgpack_sbuffer_destroy(&sb);
        memcpy(buf, "\xdd\xff\xff\xff\xff\x01\x07\xdd\x7f\xff\xff\xff", 12);
        return 12;
    case 4: /* empty frame */
        msgpack_sbuffer_destroy(&sb);
        return 0;
    case 5: { /* a real message with one byte flipped */
        size_t n;
        const ipl_proto_msg_desc_t *msgs = ipl_proto_messages(&n);
        ipl_msg_t zero;
        memset(&zero, 0, sizeof zero);
        ipl_msg_encode(msgs[s_rand() % n].type, &zero.u, &sb);
        if (sb.size) sb.data[s_rand() % sb.size] ^= (char)(1 + s_rand() % 255);
        len = sb.size;
        break;
    }
    case 6: /* unknown type, valid envelope */
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint64(&pk, IPL_PROTO_VERSION);
        msgpack_pack_uint64(&pk, 200 + s_rand() % 50);
        msgpack_pack_str_with_body(&pk, "x", 1);
        len = sb.size;
        break;
    default: /* a vLLM-shaped batch with a garbage event */
        msgpack_pack_array(&pk, 3);
        msgpack_pack_double(&pk, 1700000000.5);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 4);
        msgpack_pack_str_with_body(&pk, "BlockStored", 11);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_int64(&pk, -(int64_t)(s_rand() % 1000));
        msgpack_pack_str_with_body(&pk, "parent?", 7);
        msgpack_pack_array(&pk, 65535);
        len = sb.size;
        break;
    }
    if (len > cap) len = cap;
    if (len) memcpy(buf, sb.data, len);
    msgpack_sbuffer_destroy(&sb);
    return len;
}

/* One malformed frame into buf: never one that decodes as a catalogue message (a target
 * would act on it — a RECORD counted, a ROUTE_REQ answered — and robustness tests could not
 * tell what was dropped). */
static size_t s_frame(uint8_t *buf, size_t cap)
{
    for (int tries = 0; tries < 16; tries++) {
        size_t len = s_frame_try(buf, cap);
        ipl_msg_t msg;
        if (ipl_msg_decode(buf, len, &msg) != 0) return len;
        ipl_msg_clear(&msg);
    }
    return 0; /* an empty frame never decodes */
}

static int s_raw(const char *endpoint, long count)
{
    const char *hostport = strstr(endpoint, "://");
    hostport = hostport ? hostport + 3 : endpoint;
    const char *colon = strrchr(hostport, ':');
    if (!colon) return 2;
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return 2;
    for (long i = 0; i < count; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return 1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            uint8_t buf[1024];
            size_t len = s_frame(buf, sizeof buf);
            if (i % 2 == 0) len = (size_t)(s_rand() % sizeof buf); /* pure noise half the time */
            for (size_t k = 0; k < len && i % 2 == 0; k++) buf[k] = (uint8_t)s_rand();
            (void)!write(fd, buf, len);
        }
        close(fd);
    }
    return 0;
}

static int s_usage(void)
{
    fprintf(stderr, "usage: inferplanectl poke --endpoint EP [--socket dealer|req|push|pub|sub|raw]"
                    " [--count N] [--seed S]\n");
    return 2;
}

int ctl_poke(int argc, char **argv)
{
    const char *endpoint = NULL, *type = "dealer";
    long count = 200;
    s_rng = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help")) {
            s_usage();
            return 0;
        } else if (!strcmp(argv[i], "--endpoint") && v) {
            endpoint = v, i++;
        } else if (!strcmp(argv[i], "--socket") && v) {
            type = v, i++;
        } else if (!strcmp(argv[i], "--count") && v) {
            count = atol(v), i++;
        } else if (!strcmp(argv[i], "--seed") && v) {
            s_rng = strtoull(v, NULL, 10) * 0x9e3779b97f4a7c15ULL + 1, i++;
        } else {
            return s_usage();
        }
    }
    if (!endpoint || count < 0 || count > 1000000) return s_usage();
    if (!strcmp(type, "raw")) return s_raw(endpoint, count);

    int zt = !strcmp(type, "push")   ? ZMQ_PUSH
             : !strcmp(type, "pub")  ? ZMQ_PUB
             : !strcmp(type, "sub")  ? ZMQ_XSUB
             : !strcmp(type, "dealer") || !strcmp(type, "req") ? ZMQ_DEALER
                                     : -1;
    if (zt < 0) return s_usage();
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, zt);
    int linger = 2000, hwm = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    int rc = zt == ZMQ_PUB ? zmq_bind(sock, endpoint) : zmq_connect(sock, endpoint);
    if (rc != 0) {
        fprintf(stderr, "inferplanectl poke: cannot %s %s: %s\n", zt == ZMQ_PUB ? "bind" : "connect",
                endpoint, zmq_strerror(zmq_errno()));
        zmq_close(sock);
        zmq_ctx_term(ctx);
        return 1;
    }
    if (zt == ZMQ_PUB) usleep(700 * 1000); /* let subscribers connect (slow joiner) */
    uint8_t buf[1024];
    for (long i = 0; i < count; i++) {
        size_t len = s_frame(buf, sizeof buf);
        if (zt == ZMQ_PUB || zt == ZMQ_XSUB) {
            /* vLLM layout: topic, 8-byte seq (sometimes short), payload; or a lone frame */
            int frames = 1 + (int)(s_rand() % 3);
            if (frames >= 2) zmq_send(sock, "kv-events", 9, ZMQ_SNDMORE);
            if (frames == 3) {
                uint8_t seq[8] = {0, 0, 0, 0, 0, 0, 0, (uint8_t)i};
                zmq_send(sock, seq, 1 + s_rand() % 8, ZMQ_SNDMORE);
            }
            zmq_send(sock, buf, len, 0);
        } else {
            if (!strcmp(type, "req") || s_rand() % 4 == 0) zmq_send(sock, "", 0, ZMQ_SNDMORE);
            if (s_rand() % 5 == 0) zmq_send(sock, buf, len / 2, ZMQ_SNDMORE); /* extra frame */
            zmq_send(sock, buf, len, 0);
        }
    }
    if (zt == ZMQ_PUB) usleep(300 * 1000);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return 0;
}
