/*
 * cmd/diagnose.c: `ncclguard diagnose [--json] [--root DIR] [--nccl PATH]`: what this
 * node offers a NCCL job, as far as it can be seen without running one: the NCCL
 * library and its version, the driver and the GPUs (NVML through dlopen when it
 * is there, else /proc/driver/nvidia), the topology matrix (nvidia-smi topo -m),
 * the InfiniBand ports (/sys/class/infiniband), the interfaces that
 * NCCL_SOCKET_IFNAME selects, and the environment audit of envcheck. Whatever
 * cannot be seen gets its own "not seen" line, never silence.
 *
 * --root DIR reads /sys and /proc under DIR (fixture trees in tests); NVML,
 * nvidia-smi and the interfaces' addresses belong to the live machine and are
 * not used then.
 */
#include "cmd/diagnose.h"

#include <dirent.h>
#include <dlfcn.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/envcheck.h"
#include "envcheck.h"
#include "policy/config_load.h"
#include "policy/facts.h"

#define USAGE_LINE "usage: ncclguard diagnose [--json] [--root DIR] [--nccl PATH]"

static const char *root = "";
static int as_json;
static json_t *doc, *not_seen;

static void diagnose_usage(FILE *out)
{
    fprintf(out, USAGE_LINE
            "\n\n"
            "What this node offers a NCCL job: the NCCL library and version, the driver and\n"
            "GPUs, the topology matrix, the InfiniBand ports, the interfaces that\n"
            "NCCL_SOCKET_IFNAME selects, and the NCCL_* audit of envcheck. Each thing it\n"
            "cannot see gets a \"not seen\" line.\n\n"
            "  --json       one JSON document (schema ncclguard.diagnose/1)\n"
            "  --root DIR   read /sys and /proc under DIR (NVML, nvidia-smi and addresses\n"
            "               are then not used)\n"
            "  --nccl PATH  the libnccl.so.2 to report on (as envcheck --nccl)\n\n"
            "Exit status: 0, 64 (usage).\n");
}

/* Prints a line of the text report (nothing with --json). */
static void say(const char *fmt, ...)
{
    if (as_json) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static void unseen(const char *what, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    json_array_append_new(not_seen, json_pack("{s:s, s:s}", "what", what, "why", why));
    say("not seen: %s: %s\n", what, why);
}

/* The first line of root + path, without its newline; 0, or -1 when unreadable. */
static int read_line(const char *path, char *buf, size_t len)
{
    char full[3 * PATH_MAX];
    snprintf(full, sizeof full, "%s%s", root, path);
    FILE *f = fopen(full, "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* The names in root + path, sorted; NULL when it cannot be listed. */
static struct dirent **list_dir(const char *path, int *n)
{
    char full[PATH_MAX];
    snprintf(full, sizeof full, "%s%s", root, path);
    struct dirent **names;
    *n = scandir(full, &names, NULL, alphasort);
    return *n < 0 ? NULL : names;
}

static int dotted(const char *name)
{
    return name[0] == '.';
}

static struct ng_audit audit;
static int audited;

static void nccl_section(const char *nccl)
{
    static struct ng_nccl_found f;
    static struct ng_known known;
    int code = 0;
    if (cmd_nccl_audit(nccl, &f, &known, &audit, &code) != 0) {
        json_object_set_new(doc, "nccl", json_null());
        json_object_set_new(doc, "env_audit", json_null());
        unseen("NCCL library", "no libnccl.so.2 found (NCCL_HOME, CUDA_HOME, /usr/local/cuda, "
                               "the loader's path); the env audit needs one");
        return;
    }
    json_object_set_new(doc, "nccl",
                        json_pack("{s:s, s:s, s:i}", "path", f.path, "version", audit.nccl_version,
                                  "version_code", code));
    say("nccl:     NCCL %s at %s\n", audit.nccl_version, f.path);
    json_t *findings = json_array();
    for (size_t i = 0; i < audit.nfindings; i++) {
        const struct ng_finding *x = &audit.f[i];
        const char *sev = x->severity == NG_SEV_WARNING ? "warning" : "note";
        json_array_append_new(findings, json_pack("{s:s, s:s, s:s, s:s}", "severity", sev, "kind",
                                                  ncclguard_finding_kind_name(x->kind), "variable",
                                                  x->var, "message", x->message));
    }
    json_object_set_new(doc, "env_audit",
                        json_pack("{s:I, s:I, s:I, s:o}", "variables", (json_int_t)audit.nvars,
                                  "warnings", (json_int_t)audit.warnings, "notes",
                                  (json_int_t)audit.notes, "findings", findings));
    audited = 1;
}

/* The audit's lines, last in the text report. */
static void audit_lines(void)
{
    if (!audited) return;
    say("env:      %zu NCCL_* variable%s, %zu warning%s, %zu note%s (ncclguard envcheck)\n",
        audit.nvars, audit.nvars == 1 ? "" : "s", audit.warnings, audit.warnings == 1 ? "" : "s",
        audit.notes, audit.notes == 1 ? "" : "s");
    for (size_t i = 0; i < audit.nfindings; i++)
        say("  %s: %s\n", audit.f[i].severity == NG_SEV_WARNING ? "warning" : "note",
            audit.f[i].message);
}

/* NVML's C API (nvml.h): the few calls used, with its types as plain C. */
typedef int (*nvml_fn)(void);
typedef int (*nvml_str_fn)(char *, unsigned);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned);

/* GPUs through NVML; 0, or -1 (with why) when NVML is not usable. */
static int gpus_nvml(json_t *gpus, char *driver, size_t dlen, char *why, size_t wlen)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, wlen, "libnvidia-ml.so.1 not loadable (%s)", dlerror());
        return -1;
    }
    nvml_fn init = (nvml_fn)dlsym(h, "nvmlInit_v2"), shutdown = (nvml_fn)dlsym(h, "nvmlShutdown");
    nvml_str_fn drv = (nvml_str_fn)dlsym(h, "nvmlSystemGetDriverVersion");
    nvml_count_fn count = (nvml_count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_handle_fn by_index = (nvml_handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_name_fn name = (nvml_name_fn)dlsym(h, "nvmlDeviceGetName");
    unsigned n = 0;
    int rc = -1;
    if (!init || !shutdown || !drv || !count || !by_index || !name)
        snprintf(why, wlen, "libnvidia-ml.so.1 lacks the NVML calls used");
    else if (init() != 0)
        snprintf(why, wlen, "nvmlInit failed (no driver loaded?)");
    else {
        if (drv(driver, (unsigned)dlen) != 0) snprintf(driver, dlen, "unknown");
        if (count(&n) == 0) {
            for (unsigned i = 0; i < n; i++) {
                void *dev;
                char nm[96] = "unknown";
                if (by_index(i, &dev) == 0) name(dev, nm, sizeof nm);
                json_array_append_new(gpus, json_pack("{s:i, s:s}", "index", i, "name", nm));
            }
            rc = 0;
        } else {
            snprintf(why, wlen, "nvmlDeviceGetCount failed");
        }
        shutdown();
    }
    dlclose(h);
    return rc;
}

static void gpu_section(void)
{
    json_t *gpus = json_array();
    char driver[128] = "", why[256] = "", line[256];
    const char *source = "nvml";
    if (*root || gpus_nvml(gpus, driver, sizeof driver, why, sizeof why) != 0) {
        if (!*root) unseen("GPUs through NVML", "%s; reading /proc/driver/nvidia", why);
        source = "/proc/driver/nvidia";
        json_array_clear(gpus);
        if (read_line("/proc/driver/nvidia/version", line, sizeof line) == 0) {
            const char *p = strstr(line, "Kernel Module");
            p = p ? p + strlen("Kernel Module") : line;
            while (*p == ' ') p++;
            snprintf(driver, sizeof driver, "%.*s", (int)strcspn(p, " "), p);
        }
        const struct ng_facts *facts = ncclguard_facts(NG_FACT_GPU);
        int n;
        struct dirent **names = list_dir("/proc/driver/nvidia/gpus", &n);
        for (int i = 0; names && i < n; i++) {
            if (!dotted(names[i]->d_name))
                json_array_append_new(gpus,
                                      json_pack("{s:i, s:s}", "index", (int)json_array_size(gpus),
                                                "bus_id", names[i]->d_name));
            free(names[i]);
        }
        free(names);
        json_t *models = json_array();
        for (int i = 0; i < facts->nmodels; i++)
            json_array_append_new(models, json_string(facts->gpu_model[i]));
        json_object_set_new(doc, "gpu_models", models);
    }
    /* the CUDA driver API's version: what a job's libcuda.so.1 says */
    int cuda = 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*get)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
    if (!get || get(&cuda) != 0) cuda = 0;
    if (!h) unseen("CUDA driver", "libcuda.so.1 not loadable");
    json_object_set_new(doc, "driver",
                        json_pack("{s:s?, s:s, s:o}", "version", *driver ? driver : NULL, "source",
                                  source, "cuda_driver", cuda ? json_integer(cuda) : json_null()));
    json_object_set_new(doc, "gpus", gpus);
    if (*driver)
        say("driver:   NVIDIA %s (%s)", driver, source);
    else
        unseen("NVIDIA driver", "no %s/proc/driver/nvidia/version", root);
    if (cuda)
        say("%sCUDA driver API %d.%d (libcuda.so.1)\n", *driver ? "; " : "driver:   ", cuda / 1000,
            cuda % 1000 / 10);
    else if (*driver)
        say("\n");
    size_t n = json_array_size(gpus);
    if (!n) {
        unseen("GPUs", "%s lists none",
               *root || strcmp(source, "nvml") ? "/proc/driver/nvidia/gpus" : "NVML");
        return;
    }
    say("gpus:     %zu\n", n);
    json_t *g, *models = json_object_get(doc, "gpu_models");
    size_t i;
    json_array_foreach(gpus, i, g)
    {
        json_t *name = json_object_get(g, "name"), *bus = json_object_get(g, "bus_id");
        say("  %zu: %s\n", i, name ? json_string_value(name) : json_string_value(bus));
    }
    if (models && json_array_size(models)) {
        say("  models:");
        json_array_foreach(models, i, g) say("%s %s", i ? "," : "", json_string_value(g));
        say("\n");
    }
}

/* Whether nvidia-smi is on PATH. */
static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    for (const char *p = path ? path : ""; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, prog);
        if (len && access(buf, X_OK) == 0) return 1;
        p += len + (p[len] == ':');
    }
    return 0;
}

/* The output of a command (stdout, up to 64 KiB); NULL when it fails. */
static char *capture(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 65536, n = 0;
    char *text = malloc(cap);
    if (text) n = fread(text, 1, cap - 1, f);
    int st = pclose(f);
    if (!text || st != 0) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

static void topology_section(void)
{
    char *text = NULL;
    if (*root)
        unseen("topology matrix", "not taken with --root (nvidia-smi reads the live machine)");
    else if (!on_path("nvidia-smi"))
        unseen("topology matrix", "nvidia-smi is not on PATH");
    else if (!(text = capture("nvidia-smi topo -m 2>/dev/null")))
        unseen("topology matrix", "nvidia-smi topo -m failed");
    json_object_set_new(doc, "topology", text ? json_string(text) : json_null());
    if (!text) return;
    say("topology: (nvidia-smi topo -m)\n");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) say("  %s\n", line);
    free(text);
}

static int plain_name(const char *s)
{
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            !strchr("._-", *s))
            return 0;
    return 1;
}

/* The active MTU of an IB port, from `ibv_devinfo` (sysfs does not hold it). */
static int active_mtu(const char *dev, const char *port)
{
    if (*root || !on_path("ibv_devinfo") || !plain_name(dev) || !plain_name(port)) return 0;
    char cmd[640];
    snprintf(cmd, sizeof cmd, "ibv_devinfo -d '%s' -i '%s' 2>/dev/null", dev, port);
    char *text = capture(cmd), *p = text ? strstr(text, "active_mtu:") : NULL;
    int mtu = p ? atoi(p + strlen("active_mtu:")) : 0;
    free(text);
    return mtu;
}

/* The first line of dir/port/leaf, left as it is when unreadable. */
static void port_file(const char *dir, const char *port, const char *leaf, char *buf, size_t len)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/%s", dir, port, leaf);
    read_line(path, buf, len);
}

static void ib_section(void)
{
    json_t *ports = json_array();
    int ndev;
    struct dirent **devs = list_dir("/sys/class/infiniband", &ndev);
    int mtu_seen = 0, nports = 0;
    for (int d = 0; devs && d < ndev; d++) {
        const char *dev = devs[d]->d_name;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "/sys/class/infiniband/%s/ports", dev);
        int np;
        struct dirent **pn = dotted(dev) ? NULL : list_dir(dir, &np);
        for (int p = 0; pn && p < np; p++) {
            const char *port = pn[p]->d_name;
            if (dotted(port)) continue;
            char state[64] = "?", phys[64] = "?", rate[64] = "?", layer[32] = "?", ndev_[64] = "";
            port_file(dir, port, "state", state, sizeof state);
            port_file(dir, port, "phys_state", phys, sizeof phys);
            port_file(dir, port, "rate", rate, sizeof rate);
            port_file(dir, port, "link_layer", layer, sizeof layer);
            port_file(dir, port, "gid_attrs/ndevs/0", ndev_, sizeof ndev_);
            int mtu = active_mtu(dev, port);
            mtu_seen |= mtu > 0;
            nports++;
            json_array_append_new(ports,
                                  json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:o, s:s?}", "device",
                                            dev, "port", atoi(port), "state", state, "phys_state",
                                            phys, "rate", rate, "link_layer", layer, "active_mtu",
                                            mtu ? json_integer(mtu) : json_null(), "netdev",
                                            *ndev_ ? ndev_ : NULL));
            say("ib:       %s port %s: %s, %s, %s, %s", dev, port, state, phys, rate, layer);
            if (*ndev_) say(", netdev %s", ndev_);
            if (mtu) say(", active MTU %d", mtu);
            say("\n");
        }
        for (int p = 0; pn && p < np; p++) free(pn[p]);
        free(pn);
    }
    for (int d = 0; devs && d < ndev; d++) free(devs[d]);
    free(devs);
    json_object_set_new(doc, "ib", ports);
    if (!nports)
        unseen("InfiniBand", "no port under %s/sys/class/infiniband", root);
    else if (!mtu_seen)
        unseen("IB active MTU", "sysfs does not hold it, and ibv_devinfo %s",
               *root ? "is not run with --root" : "is not on PATH or failed");
}

/* NCCL_SOCKET_IFNAME (NCCL's socket code): a comma-separated list of name
 * prefixes, each maybe with ":port"; a leading '^' selects the interfaces that
 * match none, a '=' (after the '^', if any) compares whole names. Unset: the ib*
 * interfaces, else all but docker* and lo*, else docker*, else lo*. */
static int match_list(const char *list, const char *name, int exact)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        size_t plen = strcspn(p, ":,");
        if (plen > len) plen = len;
        if (plen &&
            (exact ? strlen(name) == plen && !strncmp(name, p, plen) : !strncmp(name, p, plen)))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static int selected(const char *spec, const char *name)
{
    int not = spec[0] == '^';
    if (not ) spec++;
    int exact = spec[0] == '=';
    if (exact) spec++;
    return match_list(spec, name, exact) ^ not ;
}

/* The addresses of an interface on the live machine, as a JSON array. */
static json_t *addresses(const struct ifaddrs *all, const char *name)
{
    json_t *out = json_array();
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (!a->ifa_addr || strcmp(a->ifa_name, name)) continue;
        int fam = a->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        char host[NI_MAXHOST];
        socklen_t len = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a->ifa_addr;
        if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue; /* NCCL skips */
        if (getnameinfo(a->ifa_addr, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) == 0)
            json_array_append_new(out, json_string(host));
    }
    return out;
}

static void net_section(void)
{
    const char *spec = getenv("NCCL_SOCKET_IFNAME");
    int n;
    struct dirent **names = list_dir("/sys/class/net", &n);
    struct ifaddrs *all = NULL;
    if (!*root && getifaddrs(&all) != 0) all = NULL;
    /* unset: the first of these tiers that has an interface */
    static const char *tiers[] = {"ib", "^docker,lo", "docker", "lo"};
    const char *rule = spec;
    for (size_t t = 0; !spec && t < sizeof tiers / sizeof tiers[0]; t++)
        for (int i = 0; names && i < n && !rule; i++)
            if (!dotted(names[i]->d_name) && selected(tiers[t], names[i]->d_name)) rule = tiers[t];
    json_t *ifs = json_array();
    if (spec)
        say("net:      NCCL_SOCKET_IFNAME=%s selects (*):\n", spec);
    else
        say("net:      NCCL_SOCKET_IFNAME unset: NCCL takes ib*, else all but docker* and lo*, "
            "else docker*, else lo*; here %s (*):\n",
            rule ? rule : "none");
    int any = 0;
    for (int i = 0; names && i < n; i++) {
        const char *name = names[i]->d_name;
        if (dotted(name)) continue;
        char path[PATH_MAX], oper[32] = "?", mtu[16] = "?", speed[16] = "";
        snprintf(path, sizeof path, "/sys/class/net/%s/operstate", name);
        read_line(path, oper, sizeof oper);
        snprintf(path, sizeof path, "/sys/class/net/%s/mtu", name);
        read_line(path, mtu, sizeof mtu);
        snprintf(path, sizeof path, "/sys/class/net/%s/speed", name);
        if (read_line(path, speed, sizeof speed) != 0 || atol(speed) <= 0) speed[0] = '\0';
        json_t *addr = all ? addresses(all, name) : json_null();
        /* NCCL takes only interfaces with an address (getifaddrs), so on the live
         * machine one without is not selected; under --root addresses are unknown */
        int match = rule && selected(rule, name) && (!all || json_array_size(addr));
        any |= match;
        json_array_append_new(ifs,
                              json_pack("{s:s, s:b, s:s, s:i, s:o, s:o}", "name", name, "selected",
                                        match, "operstate", oper, "mtu", atoi(mtu), "speed_mbps",
                                        *speed ? json_integer(atol(speed)) : json_null(),
                                        "addresses", addr));
        say("  %s %s: %s, mtu %s%s%s", match ? "*" : " ", name, oper, mtu, *speed ? ", " : "",
            *speed ? speed : "");
        say("%s", *speed ? " Mb/s" : "");
        size_t k;
        json_t *a;
        if (all) json_array_foreach(addr, k, a) say("%s%s", k ? " " : ", ", json_string_value(a));
        say("\n");
    }
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    if (all) freeifaddrs(all);
    json_object_set_new(doc, "net",
                        json_pack("{s:s?, s:s?, s:o}", "socket_ifname", spec, "rule", rule,
                                  "interfaces", ifs));
    if (!names && n < 0)
        unseen("network interfaces", "no %s/sys/class/net", root);
    else if (!any)
        unseen("socket interface", "no interface matches %s%s", spec ? "NCCL_SOCKET_IFNAME=" : "",
               spec ? spec : "NCCL's default order");
    if (*root)
        unseen("interface addresses", "not read with --root (they belong to the live machine)");
}

int cmd_diagnose(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, 0, 'j'},
                                         {"root", required_argument, 0, 'r'},
                                         {"nccl", required_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *nccl = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': as_json = 1; break;
        case 'r': root = optarg; break;
        case 'n': nccl = optarg; break;
        case 'h': diagnose_usage(stdout); return 0;
        default:
            fprintf(stderr, "ncclguard: diagnose: bad option '%s'; " USAGE_LINE "\n",
                    argv[optind - 1]);
            return CMD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ncclguard: diagnose: no argument '%s' expected; " USAGE_LINE "\n",
                argv[optind]);
        return CMD_EXIT_USAGE;
    }
    if (*root && (root[0] != '/' || access(root, R_OK | X_OK) != 0)) {
        fprintf(stderr,
                "ncclguard: diagnose: --root %s is not a readable absolute directory; " USAGE_LINE
                "\n",
                root);
        return CMD_EXIT_USAGE;
    }
    if (*root) ncclguard_facts_set_root(root); /* facts.c reads under it too */
    ncclguard_identity_init();
    ncclguard_log_init();
    ncclguard_config_load(&(struct ng_config_paths){0}, environ, 1);
    doc = json_pack("{s:s, s:s}", "schema", "ncclguard.diagnose/1", "host",
                    ncclguard_identity()->host);
    not_seen = json_array();
    say("ncclguard diagnose: host %s%s%s\n", ncclguard_identity()->host, *root ? ", root " : "",
        root);
    nccl_section(nccl);
    gpu_section();
    topology_section();
    ib_section();
    net_section();
    audit_lines();
    json_object_set_new(doc, "not_seen", not_seen);
    if (as_json) {
        char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        if (text) puts(text);
        free(text);
    }
    json_decref(doc);
    return 0;
}
