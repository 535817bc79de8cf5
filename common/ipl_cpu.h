/*
 * ipl_cpu — pinning a latency-critical loop to one core, with ZeroMQ's I/O threads beside it.
 *
 * A ZeroMQ message crosses two threads in each process: the I/O thread that reads the socket
 * and the loop thread that handles it. When they run on different cores, every message wakes
 * a core that may be idle, which on a virtual machine costs a hypervisor round trip (tens of
 * microseconds, docs/operations.md "Decision latency"). On one core the hand-over is a context
 * switch. Services that answer requests (the decider) offer --cpu N:
 *
 *   char err[256];
 *   if (ipl_cpu_check(cpu, err, sizeof err) != 0) ...refuse the option with err...
 *   ipl_cpu_pin_zmq_io(cpu);       // before the process's first ZeroMQ socket
 *   ...create sockets and threads that should stay unpinned (admin HTTP, policy view)...
 *   ipl_cpu_pin_thread(cpu);       // the loop thread, just before its loop
 */
#ifndef IPL_CPU_H
#define IPL_CPU_H

#include <stddef.h>

/* 0 when this process may run on core `cpu`; otherwise IPL_E_INVAL with a message naming
 * the cores it may use ("--cpu 5: this process may run on cores 0-1"). */
int ipl_cpu_check(int cpu, char *err, size_t errlen);

/* Restricts the I/O threads of the process's czmq context (zsys) to `cpu`. Takes effect for
 * I/O threads started afterwards: call it before the first ZeroMQ socket is created. */
void ipl_cpu_pin_zmq_io(int cpu);

/* Pins the calling thread to `cpu` (threads it creates afterwards inherit it). 0 or
 * IPL_E_INVAL (the core is not allowed: see ipl_cpu_check). */
int ipl_cpu_pin_thread(int cpu);

/* Writes the calling thread's allowed cores as a list ("0-1", "3") into buf. */
void ipl_cpu_allowed(char *buf, size_t size);

#endif
