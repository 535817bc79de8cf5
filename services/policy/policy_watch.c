/*
 * policy_watch — inotify on the policy directory, debounced, with polling as the fallback.
 *
 * States:   inotify (wd >= 0)  ──dir deleted/moved──►  retrying (ifd >= 0, wd < 0): polls and
 *              ▲                                         tries inotify_add_watch when due
 *              └──────────────── watch set again ◄───────┘
 *           polling for good (ifd < 0: no inotify, a filesystem without events, --watch poll)
 */
#include "policy_watch.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "ipl_hash.h"
#include "ipl_log.h"
#include "policy_compiler.h"

#define S_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE)
#define S_GONE   (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)

struct policy_watch {
    char *dir;
    policy_watch_config_t config;
    int ifd;           // inotify instance, -1: none; open for the object's life once made
    int wd;            // watch of dir, -1: not watching (polling; retrying unless `for_good`)
    bool for_good;     // polling for good: no inotify, or a filesystem without events
    bool pending;      // inotify: events seen since the last look
    bool written;      // ... and one of them named a policy file
    uint64_t first_ms; // the first and last event of the pending burst
    uint64_t last_ms;
    uint64_t next_poll; // polling: the next look
    uint64_t events;
    char reason[256]; // why it polls
};

// Filesystems where a change made on another host (or the hypervisor's side) raises no
// inotify event on this one; local changes would, but that is not how they get edited.
static const struct {
    uint32_t magic;
    const char *name;
} s_remote_fs[] = {
    {0x6969, "nfs"},       {0x517b, "smb"},        {0xff534d42, "cifs"},     {0xfe534d42, "smb2"},
    {0x65735546, "fuse"},  {0x01021997, "9p"},     {0x6a656a63, "virtiofs"}, {0x00c36400, "ceph"},
    {0x5346414f, "afs"},   {0x6b414653, "afs"},    {0x73757245, "coda"},     {0x01161970, "gfs2"},
    {0x7461636f, "ocfs2"}, {0x0bd00bd0, "lustre"}, {0x47504653, "gpfs"},     {0x786f4256, "vboxsf"},
};

static const char *s_remote(const char *dir)
{
    struct statfs st;
    if (statfs(dir, &st) != 0) return NULL;
    for (size_t i = 0; i < sizeof s_remote_fs / sizeof s_remote_fs[0]; i++)
        if ((uint32_t)st.f_type == s_remote_fs[i].magic) return s_remote_fs[i].name;
    return NULL;
}

static void s_log_mode(const policy_watch_t *self)
{
    char q1[512], q2[512];
    if (self->wd >= 0)
        IPL_INFO("policy_watch", "mode=inotify dir=%s debounce_ms=%llu",
                 ipl_log_quote(q1, sizeof q1, self->dir),
                 (unsigned long long)self->config.debounce_ms);
    else // a warning unless asked for
        ipl_log(self->config.poll ? IPL_LOG_INFO : IPL_LOG_WARN, "policy_watch",
                "mode=poll dir=%s interval_ms=%llu reason=%s",
                ipl_log_quote(q1, sizeof q1, self->dir), (unsigned long long)self->config.poll_ms,
                ipl_log_quote(q2, sizeof q2, self->reason));
}

// Tries to watch the directory; on failure says why in `reason` (polling meanwhile).
static bool s_add_watch(policy_watch_t *self)
{
    const char *fs = s_remote(self->dir);
    if (fs) {
        snprintf(self->reason, sizeof self->reason,
                 "the directory is on %s, where changes made elsewhere raise no inotify events",
                 fs);
        self->for_good = true; // the fd stays open (the loop waits on it): it never fires
        return false;
    }
    self->wd = inotify_add_watch(self->ifd, self->dir, S_EVENTS | IN_ONLYDIR | S_GONE);
    if (self->wd >= 0) {
        self->reason[0] = '\0';
        return true;
    }
    snprintf(self->reason, sizeof self->reason,
             "cannot watch the directory (%s); trying again every %llu ms", strerror(errno),
             (unsigned long long)self->config.poll_ms);
    return false;
}

policy_watch_t *policy_watch_new(const char *dir, const policy_watch_config_t *config)
{
    policy_watch_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->dir = strdup(dir);
    if (!self->dir) {
        free(self);
        return NULL;
    }
    if (config) self->config = *config;
    if (!self->config.debounce_ms) self->config.debounce_ms = 100;
    if (!self->config.max_delay_ms) self->config.max_delay_ms = 1000;
    if (!self->config.poll_ms) self->config.poll_ms = 1000;
    self->wd = -1;
    self->ifd = -1;
    self->for_good = true;
    if (self->config.poll) {
        snprintf(self->reason, sizeof self->reason, "asked for (--watch poll)");
    } else if ((self->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
        snprintf(self->reason, sizeof self->reason, "inotify_init1 failed: %s", strerror(errno));
    } else {
        self->for_good = false;
        s_add_watch(self);
    }
    self->pending = true; // due at once: a first look (next_poll is 0 too)
    s_log_mode(self);
    return self;
}

void policy_watch_destroy(policy_watch_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_watch_t *self = *self_p;
    if (self->ifd >= 0) close(self->ifd); // removes the watch too
    free(self->dir);
    free(self);
    *self_p = NULL;
}

int policy_watch_fd(const policy_watch_t *self)
{
    return self->ifd;
}

// The pending look: `debounce_ms` of quiet after the last event, never past `max_delay_ms`
// after the first.
static uint64_t s_look_at(const policy_watch_t *self)
{
    uint64_t quiet = self->last_ms + self->config.debounce_ms;
    uint64_t latest = self->first_ms + self->config.max_delay_ms;
    return quiet < latest ? quiet : latest;
}

static void s_note(policy_watch_t *self, uint64_t now_ms)
{
    if (!self->pending) self->first_ms = now_ms;
    self->pending = true;
    self->last_ms = now_ms;
}

size_t policy_watch_drain(policy_watch_t *self, uint64_t now_ms)
{
    if (self->ifd < 0) return 0;
    _Alignas(struct inotify_event) char buf[8192];
    size_t n = 0;
    bool gone = false;
    for (int rounds = 0; rounds < 64; rounds++) { // bounded: a busy directory cannot starve
        ssize_t got = read(self->ifd, buf, sizeof buf);
        if (got <= 0) break; // EAGAIN: drained (EINTR: the loop comes back)
        for (char *p = buf; p < buf + got;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            n++;
            if (e->mask & IN_Q_OVERFLOW) self->written = true; // events lost: compile anyway
            if (e->wd == self->wd && self->wd >= 0 && (e->mask & S_GONE)) gone = true;
            if (e->len && policy_compiler_is_policy_file(e->name)) self->written = true;
            p += sizeof *e + e->len;
        }
    }
    if (n) s_note(self, now_ms);
    self->events += n;
    if (gone) {
        inotify_rm_watch(self->ifd, self->wd); // after IN_MOVE_SELF it still watches the inode
        self->wd = -1;
        snprintf(self->reason, sizeof self->reason,
                 "the directory was deleted or moved; watching it again once it exists");
        self->next_poll = now_ms; // look now: the policy files are gone
        s_log_mode(self);
    }
    return n;
}

policy_watch_due_t policy_watch_due(policy_watch_t *self, uint64_t now_ms)
{
    if (self->wd >= 0) {
        if (!self->pending || now_ms < s_look_at(self)) return POLICY_WATCH_IDLE;
        bool written = self->written;
        self->pending = self->written = false;
        return written ? POLICY_WATCH_COMPILE : POLICY_WATCH_LOOK;
    }
    if (now_ms < self->next_poll) return POLICY_WATCH_IDLE;
    self->next_poll = now_ms + self->config.poll_ms;
    if (!self->for_good && s_add_watch(self)) {
        self->pending = self->written = false; // this look covers what happened meanwhile
        s_log_mode(self);
    }
    return POLICY_WATCH_LOOK;
}

long policy_watch_wait_ms(const policy_watch_t *self, uint64_t now_ms)
{
    uint64_t at;
    if (self->wd >= 0) {
        if (!self->pending) return -1;
        at = s_look_at(self);
    } else {
        at = self->next_poll;
    }
    return at > now_ms ? (long)(at - now_ms) : 0;
}

const char *policy_watch_mode(const policy_watch_t *self)
{
    return self->wd >= 0 ? "inotify" : "poll";
}

const char *policy_watch_reason(const policy_watch_t *self)
{
    return self->wd >= 0 ? "" : self->reason;
}

uint64_t policy_watch_events(const policy_watch_t *self)
{
    return self->events;
}

const policy_watch_config_t *policy_watch_config(const policy_watch_t *self)
{
    return &self->config;
}

uint64_t policy_watch_signature(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) return 1;
    uint64_t sig = ipl_hash_bytes(dir, strlen(dir));
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!policy_compiler_is_policy_file(e->d_name)) continue;
        size_t n = strlen(e->d_name);
        struct stat st;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint64_t item[5] = {ipl_hash_bytes(e->d_name, n), 0, 0, 0, 0};
        if (stat(path, &st) == 0) {
            item[1] = (uint64_t)st.st_size;
            item[2] = (uint64_t)st.st_ino;
            item[3] = (uint64_t)st.st_mtim.tv_sec;
            item[4] = (uint64_t)st.st_mtim.tv_nsec;
        }
        sig ^= ipl_hash_bytes(item, sizeof item); // order-independent: readdir order varies
    }
    closedir(dp);
    return sig | 2; // never 0 or 1
}
