/*
 * ipl_cpu — core pinning (see ipl_cpu.h).
 */
#include "ipl_cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include <czmq.h>

#include "ipl_error.h"

/* The calling thread's allowed cores as "0-3,6" (at most `size` bytes, always terminated). */
static void s_list(const cpu_set_t *set, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < size; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = last > c ? snprintf(buf + used, size - used, "%s%d-%d", used ? "," : "", c, last)
                         : snprintf(buf + used, size - used, "%s%d", used ? "," : "", c);
        if (n < 0) break;
        used += (size_t)n;
        c = last;
    }
}

void ipl_cpu_allowed(char *buf, size_t size)
{
    if (!size) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        snprintf(buf, size, "?");
        return;
    }
    s_list(&set, buf, size);
}

int ipl_cpu_check(int cpu, char *err, size_t errlen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0 && cpu < CPU_SETSIZE &&
        pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 && CPU_ISSET(cpu, &set))
        return IPL_OK;
    char allowed[128];
    ipl_cpu_allowed(allowed, sizeof allowed);
    if (err && errlen)
        snprintf(err, errlen, "--cpu %d: this process may run on cores %s", cpu, allowed);
    return IPL_E_INVAL;
}

void ipl_cpu_pin_zmq_io(int cpu)
{
    zsys_thread_affinity_cpu_add(cpu);
}

int ipl_cpu_pin_thread(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE) return IPL_E_INVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? IPL_OK : IPL_E_INVAL;
}
