/*
 * sim_fault — faults armed at run time through the simulator-only admin route
 * `POST /sim/fault`, for tests of what a gateway does when a worker misbehaves:
 *
 *   {"status": 500, "count": 2}      the next 2 generation requests are answered with that
 *                                    status (vLLM's error body), e.g. 500, 503 or 429
 *   {"stall_ms": 3000, "count": 1}   the next request sends nothing for 3 s (a non-streamed one
 *                                    not even its headers; a stream its headers only), then is
 *                                    served as usual — a worker stuck before its first byte
 *   {}                               disarms (count 0)
 *
 * Each armed fault is used up by `count` requests (both kinds may be armed at once: status
 * first). A request whose client goes away while it stalls stops stalling at once. Also here:
 * whether a client is gone (sim_fault_peer_gone), which the simulator checks while a request
 * waits for the engine, as vLLM aborts a request whose client disconnects.
 *
 * Thread-safe.
 */
#ifndef SIM_FAULT_H
#define SIM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sim_fault sim_fault_t;

sim_fault_t *sim_fault_new(void);
void sim_fault_destroy(sim_fault_t **self_p);

/* Arms faults from the JSON body of POST /sim/fault. 0, or -1 with a message in err. */
int sim_fault_arm(sim_fault_t *self, const char *json, size_t len, char *err, size_t errlen);
/* For one generation request: the status to answer with (0: none) and the milliseconds to
 * stall before answering (0: none), each using up one of its armed count. */
void sim_fault_take(sim_fault_t *self, int *status, int *stall_ms);
/* What is armed now, as JSON (malloc'd). */
char *sim_fault_json(sim_fault_t *self);

/* Whether the peer of `fd` is gone: a socket (`socket`: its client closed or reset it) or the
 * write end of a pipe (its reader closed it). Does not block. */
bool sim_fault_peer_gone(int fd, bool socket);
/* Sleeps up to `ms`, in short slices, while the peer of `fd` is there (fd < 0: just sleeps).
 * true when it went away meanwhile. */
bool sim_fault_stall(int ms, int fd, bool socket);

#endif
